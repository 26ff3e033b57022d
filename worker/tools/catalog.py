"""``streamforest learners``: the learner families this worker can run, from the registry.

A parameter's meaning is the first sentence of its entry in the numpydoc ``Parameters``
section of the learner's class: the registry keeps no text of its own, and the class's
docstring is where each parameter is documented once.
"""

from __future__ import annotations

import inspect
import json
import re

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


# an entry of a numpydoc Parameters section: "name : type" (or "a, b : type") at the margin
_ENTRY = re.compile(r"^(\w+(?:\s*,\s*\w+)*)\s*(?::.*)?$")
_SENTENCE_END = re.compile(r"\.\s")
# reStructuredText a terminal shows as is: ``literal``, :role:`target` (keep the words)
_MARKUP = re.compile(r"``|:\w+:`~?([^`]*)`")


def parameter_texts(cls: type) -> dict[str, str]:
    """The description of each parameter in ``cls``'s numpydoc ``Parameters`` section, as
    plain text (``{}`` without one); an entry naming several parameters (``a, b : int``)
    describes each.

    Examples
    --------
    >>> class Message:
    ...     \"\"\"A message.
    ...
    ...     Parameters
    ...     ----------
    ...     stream, key : str
    ...         Stream id; also the
    ...         ``Kafka`` message key.
    ...     \"\"\"
    >>> parameter_texts(Message)
    {'stream': 'Stream id; also the Kafka message key.', 'key': 'Stream id; also the Kafka message key.'}
    """
    lines = (inspect.getdoc(cls) or "").splitlines()
    starts = [i for i in range(len(lines) - 1)
              if lines[i].strip() == "Parameters" and set(lines[i + 1].strip()) == {"-"}]
    if not starts:
        return {}
    docs: dict[str, list[str]] = {}
    names: list[str] = []
    body = lines[starts[0] + 2:]
    for i, line in enumerate(body):
        if line and not line[0].isspace():
            if i + 1 < len(body) and body[i + 1].strip() and set(body[i + 1].strip()) == {"-"}:
                break  # the next section
            match = _ENTRY.match(line)
            names = [n.strip() for n in match.group(1).split(",")] if match else []
            for name in names:
                docs[name] = []
        elif line.strip():
            for name in names:
                docs[name].append(line.strip())
    return {name: plain_text(" ".join(words)) for name, words in docs.items() if words}


def parameter_docs(cls: type) -> dict[str, str]:
    """The first sentence of each parameter's description in ``cls``'s numpydoc
    ``Parameters`` section (``{}`` without one).

    Examples
    --------
    >>> class Learner:
    ...     \"\"\"A learner.
    ...
    ...     Parameters
    ...     ----------
    ...     n_trees : int, default 10
    ...         Trees in the forest. More is slower.
    ...     \"\"\"
    >>> parameter_docs(Learner)
    {'n_trees': 'Trees in the forest.'}
    """
    return {name: _first_sentence(text) for name, text in parameter_texts(cls).items()}


def plain_text(text: str) -> str:
    """``text`` without the reStructuredText a terminal or a JSON Schema would show as is.

    >>> plain_text("the ``ts`` of :class:`~schemas.Instance`")
    'the ts of schemas.Instance'
    """
    return _MARKUP.sub(lambda m: m.group(1) or "", text)


def _first_sentence(text: str) -> str:
    """Up to the first full stop outside parentheses."""
    for end in _SENTENCE_END.finditer(text):
        head = text[:end.start() + 1]
        if head.count("(") == head.count(")"):
            return head
    return text


def rows() -> list[dict]:
    """One row per registered family: name, tasks, roles, default roles, rankings, events,
    parameters (name: default) and their descriptions (name: first sentence, when the class
    documents it)."""
    out = []
    for name in registry.names():
        spec = registry.get(name)
        params = {k: (p.default if p.default is not p.empty else None)
                  for k, p in spec.parameters.items() if k != "seed"}
        params.update(spec.defaults)
        docs = parameter_docs(spec.cls)
        out.append({"name": name, "summary": spec.summary, "tasks": sorted(spec.tasks),
                    "roles": sorted(spec.roles), "default": default_roles(name),
                    "rankings": [m for _, m in spec.rankings],
                    "events": list(spec.events), "parameters": params,
                    "descriptions": {k: docs[k] for k in params if k in docs}})
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
        print("    parameters (set them in learners.params):")
        for k, v in row["parameters"].items():
            meaning = row["descriptions"].get(k)
            print(f"      {k}={v!r}" + (f": {meaning}" if meaning else ""))
    return 0


def add_parser(subparsers) -> None:
    """Register ``streamforest learners``."""
    p = subparsers.add_parser(
        "learners", help="list the learner families, their roles and parameters",
        description="List the learner families this worker can run: what each is, the tasks "
        "it serves, the roles it can take (predictor, ranker, selector, detector), the "
        "rankings and events it publishes, whether a stream without a profile runs it, and "
        "its parameters with their defaults and meaning. Choose learners with "
        "STREAMFOREST_LEARNERS__* (or per-stream profiles) and pass parameters with "
        "STREAMFOREST_LEARNERS__PARAMS.")
    p.add_argument("--json", action="store_true", help="as JSON")
    p.set_defaults(func=_cmd_learners)
