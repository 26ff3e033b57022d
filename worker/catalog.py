"""``streamforest learners``: the learner families this worker can run, from the registry."""

from __future__ import annotations

import json

from models import registry


def rows() -> list[dict]:
    """One row per registered family: name, tasks, roles, rankings, events, parameters."""
    out = []
    for name in registry.names():
        spec = registry.get(name)
        params = {k: (p.default if p.default is not p.empty else None)
                  for k, p in spec.parameters.items() if k != "seed"}
        params.update(spec.defaults)
        out.append({"name": name, "summary": spec.summary, "tasks": sorted(spec.tasks),
                    "roles": sorted(spec.roles), "rankings": [m for _, m in spec.rankings],
                    "events": list(spec.events), "parameters": params})
    return out


def _cmd_learners(args) -> int:
    if args.json:
        print(json.dumps(rows(), indent=2))
        return 0
    for row in rows():
        print(f"{row['name']}: {row['summary']}")
        print(f"    tasks: {', '.join(row['tasks'])}; roles: {', '.join(row['roles'])}"
              + (f"; rankings: {', '.join(row['rankings'])}" if row["rankings"] else ""))
        print("    parameters: " + ", ".join(f"{k}={v!r}" for k, v in row["parameters"].items()))
    return 0


def add_parser(subparsers) -> None:
    """Register ``streamforest learners``."""
    p = subparsers.add_parser("learners", help="list the learner families, their roles and "
                                               "parameters")
    p.add_argument("--json", action="store_true", help="as JSON")
    p.set_defaults(func=_cmd_learners)
