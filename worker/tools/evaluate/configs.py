"""The candidate configurations an evaluation compares, from a file or the running settings.

A file (TOML or JSON) lists configurations; each is a profile over the default one (the
``learners`` settings, ``STREAMFOREST_LEARNERS__*``) and applies to every stream. A
configuration may set ``task``, ``predictor``, ``selector``, ``rankers``, ``detectors``,
``batch_size``, ``ranking_every``, ``top_k``, ``seed`` and ``params``, and has a ``name``.
Without a file, the running settings are the one configuration (named ``running``), their
per-stream profiles included.

TOML::

    [[configuration]]
    name = "default (adaptive random forest)"

    [[configuration]]
    name = "forgetful forest"
    predictor = "forgetful_forest"

    [[configuration]]
    name = "online forest, 20 trees"
    predictor = "online_random_forest"
    rankers = ["online_random_forest"]
    params = { online_random_forest = { n_trees = 20 } }

JSON: ``{"configuration": [{"name": ..., ...}, ...]}`` (or the list alone).

A worker's configuration file (TOML without ``configuration``: ``[learners]``, ``[[profiles]]``
... as ``streamforest run --config FILE`` reads it) is one candidate, named after the file: the
settings ``run --config FILE`` would use in this environment (``STREAMFOREST_*`` variables over
the file), its per-stream profiles included. The candidate that wins is deployed by naming its
file. ``--configs`` takes several files: ``--configs a.toml --configs b.toml``.

A ``[[configuration]]`` entry is the same as a configuration file with its fields under
``[learners]`` (and ``name`` left out), with one difference: an entry's ``params`` are merged
per learner into the running ``learners.params``, the file's ``[learners] params`` replace them.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from pydantic import ValidationError

from ...pipeline import Profiles
from ...pipeline.config import check_config
from ...settings import (
    ConfigError,
    ProfileSettings,
    load_settings,
    pipeline_config,
    stream_profiles,
)


class ConfigFileError(ValueError):
    """A configuration file that cannot be used (exit code 2); the message says why."""


def running(settings) -> list[tuple[str, Profiles]]:
    return [("running", stream_profiles(settings))]


def load_all(paths: list[str | Path], settings) -> list[tuple[str, Profiles]]:
    """``[(name, Profiles)]`` of every configuration in the files, in order; names are unique."""
    out, names = [], {}
    for path in paths:
        for name, profiles in load(path, settings):
            if name in names:
                raise ConfigFileError(f"{path}: configuration {name!r} is also in {names[name]}")
            names[name] = path
            out.append((name, profiles))
    return out


def load(path: str | Path, settings) -> list[tuple[str, Profiles]]:
    """``[(name, Profiles)]`` of every configuration in the file, checked like settings; a
    worker's configuration file is one configuration, named after the file."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigFileError(f"cannot read {path}: {exc.strerror}") from None
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ConfigFileError(f"{path} is not valid {path.suffix[1:] or 'JSON'}: {exc}") from None
    if (path.suffix == ".toml" and isinstance(data, dict)
            and not {"configuration", "configurations"} & data.keys()):
        return [(path.name, settings_file(path))]
    items = data.get("configuration", data.get("configurations")) if isinstance(data, dict) \
        else data
    if not isinstance(items, list) or not items:
        raise ConfigFileError(f"{path}: expected a list of configurations under "
                              "'configuration' ([[configuration]] in TOML)")
    out, names = [], set()
    for i, item in enumerate(items):
        name, profiles = _one(path, i, item, settings)
        if name in names:
            raise ConfigFileError(f"{path}: configuration {i} repeats the name {name!r}")
        names.add(name)
        out.append((name, profiles))
    return out


def _one(path: Path, i: int, item, settings) -> tuple[str, Profiles]:
    where = f"{path}: configuration {i}"
    if not isinstance(item, dict):
        raise ConfigFileError(f"{where} is not a table of settings")
    fields = dict(item)
    name = str(fields.pop("name", f"configuration {i}"))
    where = f"{path}: configuration {name!r}"
    if "match" in fields:
        raise ConfigFileError(f"{where}: 'match' has no place here (a configuration applies "
                              "to every stream)")
    try:
        profile = ProfileSettings(match="*", name=name, **fields)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                             for e in exc.errors(include_url=False))
        raise ConfigFileError(f"{where}: {problems}") from None
    cfg = pipeline_config(settings.learners, profile)
    problems = check_config(cfg)
    if problems:
        raise ConfigFileError(f"{where}: " + "; ".join(f"{f}: {t}" for f, t in problems))
    return name, Profiles(cfg, [])


def settings_file(path: str | Path) -> Profiles:
    """The per-stream configurations ``streamforest run --config path`` would use here."""
    try:
        return stream_profiles(load_settings(config_file=path))
    except ConfigError as exc:
        raise ConfigFileError(str(exc)) from None
