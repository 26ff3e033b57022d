"""``streamforest learners``: the learner families this worker can run, from the registry."""

from __future__ import annotations

import json

from models import registry

#: the registry's defaults, by the role a stream without a profile runs a learner in
_DEFAULTS = ((registry.PREDICTOR, registry.DEFAULT_PREDICTORS),
             (registry.RANKER, registry.DEFAULT_RANKERS),
             (registry.DETECTOR, registry.DEFAULT_DETECTORS))


def default_roles(name: str) -> list[str]:
    """The roles ``name`` has in a stream without a profile (``[]``: none).

    >>> default_roles("adaptive_random_forest"), default_roles("forgetful_forest")
    (['predictor'], [])
    """
    return [role for role, names in _DEFAULTS if name in names]


def rows() -> list[dict]:
    """One row per registered family: name, tasks, roles, default roles, rankings, events,
    parameters."""
    out = []
    for name in registry.names():
        spec = registry.get(name)
        params = {k: (p.default if p.default is not p.empty else None)
                  for k, p in spec.parameters.items() if k != "seed"}
        params.update(spec.defaults)
        out.append({"name": name, "summary": spec.summary, "tasks": sorted(spec.tasks),
                    "roles": sorted(spec.roles), "default": default_roles(name),
                    "rankings": [m for _, m in spec.rankings],
                    "events": list(spec.events), "parameters": params})
    return out


def _cmd_learners(args) -> int:
    if args.json:
        print(json.dumps(rows(), indent=2))
        return 0
    for row in rows():
        default = f" (default {', '.join(row['default'])})" if row["default"] else ""
        print(f"{row['name']}{default}: {row['summary']}")
        print(f"    tasks: {', '.join(row['tasks'])}; roles: {', '.join(row['roles'])}"
              + (f"; rankings: {', '.join(row['rankings'])}" if row["rankings"] else "")
              + (f"; events: {', '.join(row['events'])}" if row["events"] else ""))
        print("    parameters: " + ", ".join(f"{k}={v!r}" for k, v in row["parameters"].items()))
    return 0


def add_parser(subparsers) -> None:
    """Register ``streamforest learners``."""
    p = subparsers.add_parser("learners", help="list the learner families, their roles and "
                                               "parameters")
    p.add_argument("--json", action="store_true", help="as JSON")
    p.set_defaults(func=_cmd_learners)
