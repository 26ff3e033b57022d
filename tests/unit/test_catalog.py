"""``streamforest learners`` names the defaults a stream without a profile runs."""

from __future__ import annotations

from types import SimpleNamespace

from models import registry
from worker.tools import catalog


def test_rows_mark_the_default_learners_by_role():
    rows = {r["name"]: r for r in catalog.rows()}
    assert rows["adaptive_random_forest"]["default"] == [registry.PREDICTOR]
    assert rows["adaptive_random_forest"]["events"] == ["tree_drift", "tree_warning"]
    assert rows["forgetful_forest"]["default"] == []  # available by profile
    for role, names in ((registry.PREDICTOR, registry.DEFAULT_PREDICTORS),
                        (registry.RANKER, registry.DEFAULT_RANKERS),
                        (registry.DETECTOR, registry.DEFAULT_DETECTORS)):
        assert all(role in rows[n]["default"] for n in names)


def test_text_output_names_the_default_predictor(capsys):
    assert catalog._cmd_learners(SimpleNamespace(json=False)) == 0
    lines = capsys.readouterr().out.splitlines()
    arf = next(i for i, line in enumerate(lines) if line.startswith("adaptive_random_forest"))
    assert lines[arf].startswith("adaptive_random_forest (default predictor): adaptive random")
    assert lines[arf + 1].endswith("events: tree_drift, tree_warning")
    assert any(line.startswith("forgetful_forest: ") for line in lines)
