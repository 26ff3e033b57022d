"""The published JSON Schemas of the contracts (``streamforest schemas``, ``docs/schemas/``).

* the checked-in files are what the models generate now (CI runs this: a model changed
  without ``streamforest schemas --out docs/schemas`` fails here, saying so);
* every file is a valid draft 2020-12 schema, and what the worker writes in JSON validates
  against them: predictions (classification, regression, streams of features), prediction
  batches, drift alerts, rankings, dead letters' headers; so do the examples of
  ``docs/contracts.md`` and any Instance the contract accepts;
* the schemas refuse what the contracts refuse by shape: unknown fields, another version,
  wrong types;
* the command: one contract's schema, several by name, ``--out``, ``--check``, exit code 2
  for a name that matches nothing.
"""

from __future__ import annotations

import doctest
import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from confluent_kafka import Message
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from schemas import Instance
from schemas.codec import encode
from schemas.deadletter import DeadLetterHeaders, deadletter_headers, parse_deadletter_headers
from worker import cli
from worker.intake import Caps, RecordDecoder
from worker.metrics import WorkerMetrics
from worker.output import Outbox, OutputEncoder
from worker.pipeline import PipelineConfig, Profiles
from worker.pipeline.results import FeatureResult, HeldPredictions, RankingOut
from worker.settings import OutputSettings, load_settings
from worker.step import learn_streams
from worker.task import PartitionTask
from worker.tools import catalog, contract_schemas
from worker.tools.contract_schemas import NAMES, SPECS, differences, render
from worker.tools.dev.produce import BATCH_HEADERS, batch_values, instance_values
from worker.wire import encode_predictions_json

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "docs" / "schemas"


def _validator(name: str) -> Draft202012Validator:
    """A validator of the checked-in schema ``name``."""
    return Draft202012Validator(json.loads((PUBLISHED / f"{name}.schema.json").read_text()))


def _problems(name: str, record: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in _validator(name).iter_errors(record)]


# =========================================================================== checked in


def test_the_checked_in_schemas_are_those_the_models_generate():
    found = differences(PUBLISHED, list(SPECS), stale=True)
    assert found == [], (
        "docs/schemas/ no longer matches the contracts' models:\n  " + "\n  ".join(found)
        + "\nregenerate them with `streamforest schemas --out docs/schemas`, review the diff "
        "(a changed contract may need a new version) and commit it")


def test_every_schema_is_a_valid_draft_2020_12_schema_named_for_its_contract():
    ids = set()
    for spec in SPECS:
        doc = json.loads((PUBLISHED / f"{spec.name}.schema.json").read_text())
        Draft202012Validator.check_schema(doc)
        assert doc["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert doc["title"] == spec.model.__name__ and doc["version"] == 1
        assert doc["description"] and all(p.get("description") for p in doc["properties"].values())
        ids.add(doc["$id"])
    assert ids == {f"urn:streamforest:{n}:v1" for n in NAMES}


# =========================================================================== records validate

CFG = PipelineConfig(predictor="forgetful_tree", rankers=["online_random_forest"], detectors=["adwin"],
                     batch_size=10, ranking_every=50, params={"online_random_forest": {"n_trees": 2}})
TOPIC_SCHEMAS = {"sf.predictions": "prediction", "sf.drift": "drift-alert", "sf.rankings": "ranking"}


def _records_in_json():
    """What the worker writes for a stream of Instances with a drift, a stream of
    InstanceBatches and a malformed record, every output kind in JSON."""
    rng = np.random.default_rng(1)
    X = rng.random((600, 3))
    y = [int(v) if i < 300 else 1 - int(v) for i, v in enumerate(X[:, 0] > 0.5)]  # a drift at 300
    y = [None if i % 7 == 3 else v for i, v in enumerate(y)]
    msgs = [Message(topic="in", partition=0, offset=i, key=b"a", value=v)
            for i, v in enumerate(instance_values("a", X, y, ts0=1_700_000_000_000))]
    msgs += [Message(topic="in", partition=0, offset=600 + i, key=b"b", value=v, headers=list(BATCH_HEADERS))
             for i, v in enumerate(batch_values("b", X[:100], ["UP", "DOWN"] * 50, size=20))]
    msgs.append(Message(topic="in", partition=0, offset=605, key=b"a", value=b"\xc1 junk"))
    task = PartitionTask("g", "in", 0, "in.features")
    outbox = Outbox("0.1.0")
    streams = RecordDecoder(Profiles(CFG), Caps()).read_instances(
        task, msgs, np.array([m.offset() for m in msgs], dtype=np.int64), outbox, 1 << 20)
    encoder = OutputEncoder(load_settings({}).topics, WorkerMetrics(),
                            output=OutputSettings(format="json", prediction_batches=True))
    for stream, pl, sr, lo, res in learn_streams(task, streams).results:
        encoder.encode(task, stream, pl, res, sr, lo, outbox)
    return outbox, encoder


def test_what_the_worker_writes_in_json_validates_against_the_published_schemas():
    outbox, encoder = _records_in_json()
    seen: dict[str, int] = {}
    for topic, _key, values, *batch_headers in outbox.records:
        headers = batch_headers[0] if batch_headers else encoder.headers[topic]
        assert ("content-type", b"application/json") in headers
        name = "prediction-batch" if ("sf-kind", b"prediction-batch") in headers else TOPIC_SCHEMAS[topic]
        for value in values:
            assert _problems(name, json.loads(value)) == [], value
            seen[name] = seen.get(name, 0) + 1
    assert seen["prediction"] == 600 and seen["prediction-batch"] == 5
    assert seen["drift-alert"] >= 1 and seen["ranking"] >= 1
    # the malformed record's dead letter: its headers, as text
    [(_key, value, headers, code)] = outbox.dead
    assert value == b"\xc1 junk" and code == "not_decodable"
    assert _problems("dead-letter-headers", {k: v.decode() for k, v in headers}) == []


def test_predictions_of_regressions_and_of_streams_of_features_validate():
    const = {"v": 1, "stream": "r", "model": "isoup_symrf", "classes": None, "topic": "sf.instances",
             "partition": 2}
    values = encode_predictions_json(const, [1, 2], [[1.5, -2.0], [0.25, 3.0]], [None, [1.0, 2.0]], None,
                                     [5, 6], [10, 11])
    for value in values:
        assert _problems("prediction", json.loads(value)) == []
    held = HeldPredictions(ids=["x7", "x8"], y_true=[None, 1], offsets=np.array([4, 9]), ts=np.array([100, 101]),
                           classes=[1, 0], y_pred=[0, 1], proba=np.array([[0.25, 0.75], [0.6, 0.4]]), n_features=2)
    res = FeatureResult(predictions=held, ranking=RankingOut(
        method="feature_stream", features=["a", "b"], scores=[0.7, 0.3], n_seen=2, row=-1))
    encoder = OutputEncoder(load_settings({}).topics, WorkerMetrics(), output=OutputSettings(format="json"))
    outbox = Outbox("test")
    encoder.encode_features(PartitionTask("g", "in", 0, "in.features"), "cust",
                            SimpleNamespace(model_name="feature_stream"), res, 555, 12, outbox)
    records = [(t, json.loads(v)) for t, _k, vals in outbox.records for v in vals]
    assert [t for t, _ in records] == ["sf.predictions", "sf.predictions", "sf.rankings"]
    for topic, record in records:
        assert _problems(TOPIC_SCHEMAS[topic], record) == []
    assert records[0][1]["n_features"] == 2


def test_dead_letters_of_rows_carry_the_published_headers():
    outbox = Outbox("0.1.0")
    outbox.refuse_row(PartitionTask("g", "sf.instances", 3, "sf.features"), "s1", b"s1", 41, "OutputTooLarge",
                      "too large", "output_too_large")
    [(_key, _value, headers, _code)] = outbox.dead
    text = {k: v.decode() for k, v in headers}
    assert _problems("dead-letter-headers", text) == []
    # the schema's header names are those the worker's parser reads
    parsed = parse_deadletter_headers(headers)
    assert set(parsed) <= set(DeadLetterHeaders.model_fields)
    assert {f.alias for f in DeadLetterHeaders.model_fields.values()} == {
        *dict(deadletter_headers("E", "r", "t", 0, 0, "v", code="c")), "sf-row"}


# the examples of docs/contracts.md's table, by contract
_ROW = re.compile(r"^\| `[^`]+` \| `(\w+)`")
_EXAMPLE = re.compile(r"`(\{\"v\":1.*?\})`")
_BY_MODEL = {s.model.__name__: s.name for s in SPECS}


def test_the_examples_of_the_contracts_page_validate():
    checked = []
    for line in (ROOT / "docs" / "contracts.md").read_text().splitlines():
        row = _ROW.match(line)
        if row and row.group(1) in _BY_MODEL:
            for example in _EXAMPLE.findall(line):
                assert _problems(_BY_MODEL[row.group(1)], json.loads(example)) == [], example
                checked.append(row.group(1))
    assert set(checked) == {"Instance", "InstanceBatch", "LabelEvent", "FeatureArrival", "Prediction",
                            "PredictionBatch", "DriftAlert", "Ranking"}


_label = st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(min_size=1, max_size=5))
_number = st.floats(-1e100, 1e100, allow_nan=False, allow_infinity=False)


@settings(max_examples=150, deadline=None)
@given(stream=st.text(min_size=1, max_size=8), ident=_label, ts=st.integers(0, 2**63 - 1),
       x=st.one_of(st.lists(_number, max_size=4), st.dictionaries(st.text(max_size=4), _number, max_size=4)),
       y=st.one_of(st.none(), _label, _number, st.lists(_number, min_size=1, max_size=3)),
       weight=st.one_of(st.none(), st.floats(0.0, 1e100)))
def test_any_instance_the_contract_accepts_validates_in_json(stream, ident, ts, x, y, weight):
    # text UTF-8 cannot encode (lone surrogates) is the one rule a JSON Schema cannot state
    try:
        inst = Instance(stream=stream, id=ident, ts=ts, x=x, y=y, weight=weight)
    except ValueError:
        return
    assert _problems("instance", json.loads(encode(inst, "json")[0])) == []


@pytest.mark.parametrize("name, change", [
    ("instance", {"weigth": 1.0}),  # a typo is an unknown field
    ("instance", {"v": 2}),
    ("instance", {"x": "0.1,0.2"}),
    ("instance", {"y": True}),  # a boolean is no label
    ("instance", {"x": [1e101]}),  # beyond +-1e100
    ("instance", {"weight": -1.0}),
    ("prediction", {"partition": -1}),
    ("drift-alert", {"level": "alarm"}),
    ("ranking", {"scores": ["high"]}),
])
def test_the_schemas_refuse_what_the_contracts_refuse_by_shape(name, change):
    base = {"instance": {"v": 1, "stream": "s1", "id": 7, "ts": 1, "x": [0.1, 0.2], "y": "UP"},
            "prediction": {"v": 1, "stream": "s1", "id": 7, "model": "m", "y_pred": 1, "classes": [0, 1],
                           "proba": [0.5, 0.5], "y_true": None, "topic": "t", "partition": 0, "offset": 1,
                           "ts": 1},
            "drift-alert": {"v": 1, "stream": "s1", "source": "adwin", "level": "drift", "position": 5,
                            "ts": 1},
            "ranking": {"v": 1, "stream": "s1", "method": "m", "features": ["a"], "scores": [1.0],
                        "n_seen": 1, "ts": 1}}[name]
    assert _problems(name, base) == []
    assert _problems(name, {**base, **change}) != []


# =========================================================================== the command


def test_one_contract_prints_its_schema_several_an_object_by_name(capsys):
    assert cli.main(["schemas", "ranking"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(render(SPECS[NAMES.index("ranking")]))
    assert cli.main(["schemas", "PREDICTION*", "drift-alert"]) == 0
    assert list(json.loads(capsys.readouterr().out)) == ["prediction", "prediction-batch", "drift-alert"]
    assert cli.main(["schemas", "--list"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()] == list(NAMES)


def test_out_writes_one_file_per_contract_and_check_finds_every_difference(tmp_path, capsys):
    assert cli.main(["schemas", "--out", str(tmp_path / "s")]) == 0
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == sorted(f"{n}.schema.json" for n in NAMES)
    assert all((tmp_path / "s" / f.name).read_text() == f.read_text() for f in PUBLISHED.iterdir())
    capsys.readouterr()
    assert cli.main(["schemas", "--check", str(tmp_path / "s")]) == 0
    assert capsys.readouterr().out == f"{len(NAMES)} schemas in {tmp_path / 's'} match the models\n"
    (tmp_path / "s" / "ranking.schema.json").write_text("{}\n")
    (tmp_path / "s" / "instance.schema.json").unlink()
    (tmp_path / "s" / "old.schema.json").write_text("{}\n")
    assert cli.main(["schemas", "--check", str(tmp_path / "s")]) == 1
    out = capsys.readouterr().out
    assert "instance.schema.json: missing" in out and "ranking.schema.json: differs from the Ranking model" in out
    assert "old.schema.json: no contract has this name" in out
    assert f"regenerate them: streamforest schemas --out {tmp_path / 's'}" in out
    # a selection checks only its own files
    assert cli.main(["schemas", "drift-alert", "--check", str(tmp_path / "s")]) == 0


def test_a_name_that_matches_no_contract_is_a_usage_error(capsys):
    assert cli.main(["schemas", "prediction", "alerts"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("streamforest schemas: no contract matches 'alerts'; contracts: instance, ")


def test_docstring_examples():
    for module in (contract_schemas, catalog):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        assert result.attempted > 0 and result.failed == 0
