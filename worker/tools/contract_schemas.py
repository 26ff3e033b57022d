"""``streamforest schemas``: the JSON Schema of every contract, generated from its pydantic model.

Teams register these (in a Schema Registry, a data catalog) or validate records with them. One
document per contract, in JSON Schema draft 2020-12:

* ``$id`` ``urn:streamforest:<name>:v<version>``, ``title`` (the model's name), ``version``
  (the contract's ``v``) and a ``description``: the model's docstring summary, the topic it
  travels on and who writes it, and the ``sf-kind`` header that marks it when it shares its
  topic with another contract;
* each property described by the ``Parameters`` section of the model's docstring;
* ``v`` as the versions this code reads (``const: 1``).

Generation choices (:class:`_Generator`): the unions the contracts choose a branch of by the
value's type (a label is an integer or a string; a target also a number or a list of them) are
written ``anyOf``, not pydantic's ``oneOf``: an integer is a JSON Schema ``number`` too, so
``oneOf`` would refuse every integer label. Properties carry no generated titles ("Y Pred").
The batches' columns, which their validators check and pydantic sees as ``Any``, take the JSON
form their model declares in ``json_forms``.

The schemas are checked in under ``docs/schemas/`` (``streamforest schemas --out
docs/schemas``); ``tests/unit/test_contract_schemas.py`` regenerates them and fails when they
differ from the models (``streamforest schemas --check docs/schemas`` says the same). The
worker never reads them: only this command writes or compares them.

Exit codes: 0 done; 1 ``--check`` found files that differ from the models; 2 a name that
matches no contract.
"""

from __future__ import annotations

import fnmatch
import inspect
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import GenerateJsonSchema

from schemas.batches import InstanceBatch, PredictionBatch
from schemas.deadletter import DeadLetterHeaders
from schemas.kinds import INSTANCE_BATCH, KIND_HEADER, LABEL
from schemas.messages import DriftAlert, FeatureArrival, Instance, LabelEvent, Prediction, Ranking

from ..cli import UsageError
from ..output import PREDICTION_BATCH
from ..settings import TopicSettings
from .catalog import parameter_texts, plain_text

DRAFT = "https://json-schema.org/draft/2020-12/schema"
SUFFIX = ".schema.json"


@dataclass(frozen=True)
class Spec:
    """One published contract: its name, model, topic (logical name), writer and the
    ``sf-kind`` header that marks it (``None``: no header)."""

    name: str
    model: type[BaseModel]
    topic: str
    writer: str
    kind: str | None = None


SPECS = (
    Spec("instance", Instance, "instances", "producers"),
    Spec("label-event", LabelEvent, "instances", "producers", LABEL),
    Spec("instance-batch", InstanceBatch, "instances", "producers", INSTANCE_BATCH),
    Spec("feature-arrival", FeatureArrival, "features", "producers"),
    Spec("prediction", Prediction, "predictions", "the worker"),
    Spec("prediction-batch", PredictionBatch, "predictions", "the worker", PREDICTION_BATCH),
    Spec("drift-alert", DriftAlert, "drift", "the worker"),
    Spec("ranking", Ranking, "rankings", "the worker"),
    Spec("dead-letter-headers", DeadLetterHeaders, "deadletter", "the worker"),
)
NAMES = tuple(s.name for s in SPECS)


class _Generator(GenerateJsonSchema):
    """pydantic's generator with the choices of the module doc."""

    def tagged_union_schema(self, schema) -> dict[str, Any]:
        out = super().tagged_union_schema(schema)
        if "oneOf" in out:  # a branch chosen by the value's type: any that matches will do
            out["anyOf"] = out.pop("oneOf")
            out.pop("discriminator", None)
        return out

    def field_title_should_be_set(self, schema) -> bool:
        return False


def version_of(model: type[BaseModel]) -> int:
    """The version a contract is written in (its ``v``; 1 for a model without one)."""
    field = model.model_fields.get("v")
    return 1 if field is None else int(field.default)


# a numpydoc section header: a line, then a line of dashes
_SECTION = re.compile(r"^\S.*\n-+\s*$", re.MULTILINE)


def summary(model: type) -> str:
    """A model's docstring up to its first numpydoc section, as plain text: lines joined,
    paragraphs kept.

    >>> class M:
    ...     '''One row of a ``stream``,
    ...     labelled or not.
    ...
    ...     Parameters
    ...     ----------
    ...     '''
    >>> summary(M)
    'One row of a stream, labelled or not.'
    """
    doc = inspect.getdoc(model) or ""
    head = doc[:m.start()] if (m := _SECTION.search(doc)) else doc
    paragraphs = [" ".join(p.split()) for p in head.split("\n\n") if p.strip()]
    return json_text("\n\n".join(paragraphs))


def _where(spec: Spec) -> str:
    default = TopicSettings.model_fields[spec.topic].default
    text = (f"On the {spec.topic} topic ({default} unless STREAMFOREST_TOPICS__"
            f"{spec.topic.upper()} names another), written by {spec.writer}")
    if spec.kind is not None:
        text += f", with the header {KIND_HEADER}: {spec.kind}"
    return text + "."


def _json_forms(doc: dict, model: type[BaseModel]) -> None:
    """The JSON form of the fields the model declares in ``json_forms``, in place."""
    for name, form in getattr(model, "json_forms", {}).items():
        sub = TypeAdapter(form).json_schema(schema_generator=_Generator)
        doc.setdefault("$defs", {}).update(sub.pop("$defs", {}))
        prop = doc["properties"][name]
        doc["properties"][name] = {**sub, **{k: prop[k] for k in ("default", "description")
                                             if k in prop}}


_NONE = re.compile(r"\bNone\b")


def json_text(text: str) -> str:
    """A docstring's text as a JSON reader reads it: Python's ``None`` is ``null``.

    >>> json_text("None before the first label (see ``Nonesuch``)")
    'null before the first label (see Nonesuch)'
    """
    return _NONE.sub("null", plain_text(text))


def _describe_properties(doc: dict, model: type[BaseModel]) -> None:
    """Each property's description from the model's docstring, ``v`` as its versions."""
    texts = parameter_texts(model)
    for name, field in model.model_fields.items():
        key = field.alias or name
        if key in doc["properties"] and name in texts:
            doc["properties"][key]["description"] = json_text(texts[name])
    if "v" in doc["properties"]:
        versions = sorted(getattr(model, "versions", {version_of(model)}))
        v = {"const": versions[0]} if len(versions) == 1 else {"enum": versions}
        doc["properties"]["v"] = {**v, "default": version_of(model),
                                  "description": "Schema version."}


def contract_schema(spec: Spec) -> dict:
    """The JSON Schema document of one contract.

    >>> doc = contract_schema(SPECS[0])
    >>> doc["$id"], doc["title"], doc["version"], doc["required"]
    ('urn:streamforest:instance:v1', 'Instance', 1, ['stream', 'id', 'ts', 'x'])
    """
    model = spec.model
    doc = model.model_json_schema(schema_generator=_Generator)
    _json_forms(doc, model)
    _describe_properties(doc, model)
    version = version_of(model)
    doc.pop("title", None)
    doc.pop("description", None)
    head = {"$schema": DRAFT, "$id": f"urn:streamforest:{spec.name}:v{version}",
            "title": model.__name__, "version": version,
            "description": f"{summary(model)}\n\n{_where(spec)}"}
    return {**head, **doc}


def render(spec: Spec) -> str:
    """The text of a contract's schema file: indented JSON, UTF-8, one final newline."""
    return json.dumps(contract_schema(spec), indent=2, ensure_ascii=False) + "\n"


def select(patterns: list[str]) -> list[Spec]:
    """The contracts whose name matches one of ``patterns`` (globs, any case; none: all), in
    :data:`SPECS` order; a pattern that matches none is a usage error.

    >>> [s.name for s in select(["prediction*", "RANKING"])]
    ['prediction', 'prediction-batch', 'ranking']
    """
    if not patterns:
        return list(SPECS)
    chosen = set()
    for pattern in patterns:
        hits = {n for n in NAMES if fnmatch.fnmatchcase(n, pattern.lower())}
        if not hits:
            raise UsageError(f"no contract matches {pattern!r}; contracts: {', '.join(NAMES)}")
        chosen |= hits
    return [s for s in SPECS if s.name in chosen]


def differences(directory: Path, specs: list[Spec], stale: bool) -> list[str]:
    """What in ``directory`` differs from the schemas of ``specs``: one line per file that
    differs or is missing, and with ``stale`` per schema file no contract has."""
    out = []
    for spec in specs:
        path = directory / (spec.name + SUFFIX)
        if not path.is_file():
            out.append(f"{path}: missing")
        elif path.read_text(encoding="utf-8") != render(spec):
            out.append(f"{path}: differs from the {spec.model.__name__} model")
    if stale:
        known = {s.name + SUFFIX for s in specs}
        out += [f"{p}: no contract has this name" for p in sorted(directory.glob("*" + SUFFIX))
                if p.name not in known]
    return out


def write(directory: Path, specs: list[Spec]) -> list[Path]:
    """One file per contract in ``directory`` (created if needed); the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for spec in specs:
        path = directory / (spec.name + SUFFIX)
        path.write_text(render(spec), encoding="utf-8")
        paths.append(path)
    return paths


def _cmd_schemas(args) -> int:
    specs = select(args.names)
    if args.list:
        for s in specs:
            print(f"{s.name:<20} {s.model.__name__:<18} {s.topic:<12} {s.writer}")
        return 0
    if args.check is not None:
        found = differences(Path(args.check), specs, stale=not args.names)
        for line in found:
            print(line)
        if found:
            print(f"regenerate them: streamforest schemas --out {args.check}")
            return 1
        print(f"{len(specs)} schemas in {args.check} match the models")
        return 0
    if args.out is not None:
        for path in write(Path(args.out), specs):
            print(path)
        return 0
    docs = {s.name: contract_schema(s) for s in specs}
    one = len(specs) == 1
    print(json.dumps(docs[specs[0].name] if one else docs, indent=2, ensure_ascii=False))
    return 0


def add_parser(subparsers) -> None:
    """Register ``streamforest schemas``."""
    p = subparsers.add_parser(
        "schemas", help="print or write the JSON Schema of each message contract",
        description="The JSON Schema (draft 2020-12) of each contract on streamforest's "
        "topics, generated from its model: " + ", ".join(NAMES) + ". One contract: its "
        "schema on stdout; several: a JSON object of them by name; --out DIR: one file "
        "NAME.schema.json each. Exit code 2 for a name that matches no contract, 1 when "
        "--check finds a file that differs.")
    p.add_argument("names", metavar="NAME", nargs="*",
                   help="contracts to show (globs: 'prediction*'); default: all")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", metavar="DIR", default=None,
                       help="write one file per contract into DIR")
    where.add_argument("--check", metavar="DIR", default=None,
                       help="compare DIR's files with the models (exit code 1 when one "
                       "differs, is missing or names no contract)")
    where.add_argument("--list", action="store_true",
                       help="list the contracts: name, model, topic, writer")
    p.set_defaults(func=_cmd_schemas)
