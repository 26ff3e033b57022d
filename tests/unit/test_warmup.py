"""The image's build step compiles every pipeline kind without error."""

from __future__ import annotations

from worker import warmup


def test_warmup_runs_every_pipeline_kind():
    assert warmup.main(rows=120) > 0.0
