"""What a stream's pipeline is made of, checked against the learner registry.

A :class:`PipelineConfig` names learners by their registry names (:mod:`models.registry`):

* ``predictor``: candidates in order; a stream uses the first that serves its task
  (``adaptive_random_forest`` for classification streams, a regressor for regression
  streams).
  A learner of feature arrivals (``feature_stream``, a stream of features) is named alone
  and without a selector: its stream learns per arriving column, not per instance;
* ``selector``: optional, chooses the columns the predictor sees;
* ``rankers``: every one serving the stream's task publishes rankings (a ranker named as
  the predictor too is the same learner: one forest predicts and ranks);
* ``detectors``: watch the per-row prequential loss;
* ``params``: constructor arguments per learner name.

:func:`check_config` finds every problem of a configuration before a worker consumes
anything; :func:`stream_seed` gives each stream's learners their seeds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from models import registry
from models.core.base import check_param_ranges
from models.registry import CLASSIFICATION, DETECTOR, PREDICTOR, RANKER, REGRESSION, SELECTOR

AUTO = "auto"
TASK_CHOICES = (AUTO, CLASSIFICATION, REGRESSION)
_MASK63 = (1 << 63) - 1


def stream_seed(stream: str, seed: int, salt: str = "") -> int:
    """Seed of one stream's learners: blake2b of the stream id mixed with the worker seed.

    The seed depends on nothing but the stream id, the configured seed and the component
    (``salt``), so a stream's results do not depend on which worker holds it.

    Examples
    --------
    >>> stream_seed("s1", 1) == stream_seed("s1", 1)
    True
    >>> stream_seed("s1", 1) != stream_seed("s2", 1) != stream_seed("s1", 2)
    True
    """
    digest = hashlib.blake2b(
        f"{salt}\x00{stream}".encode(), digest_size=8, person=b"streamforest"
    ).digest()
    h = int.from_bytes(digest, "little")
    return (h ^ ((int(seed) * 0x9E3779B97F4A7C15) & ((1 << 64) - 1))) & _MASK63


def _names(value) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(value)


#: when rankings are published besides every ``ranking_every`` instances: after every step
#: of the rankers (a block forest's block: every ``stride`` rows), after a step that changed
#: the top-k order of a method, or never
PUBLISH_RANKINGS = ("block", "top_k", "interval")


@dataclass(frozen=True)
class PipelineConfig:
    """The learners of a stream and how they run (one resolved profile).

    Examples
    --------
    >>> cfg = PipelineConfig(predictor="online_random_forest", rankers=["online_random_forest"])
    >>> cfg.predictor_for("classification"), cfg.rankers_for("classification")
    ('online_random_forest', ['online_random_forest'])
    >>> cfg.predictor_for("regression") is None
    True
    """

    task: str = AUTO
    predictor: tuple = registry.DEFAULT_PREDICTORS
    selector: str | None = None
    rankers: tuple = registry.DEFAULT_RANKERS
    detectors: tuple = registry.DEFAULT_DETECTORS
    batch_size: int = 100
    ranking_every: int = 1000
    publish_rankings: str = "block"
    top_k: int = 5
    seed: int = 1
    params: Mapping = field(default_factory=dict)
    profile: str = "default"

    def __post_init__(self) -> None:
        object.__setattr__(self, "predictor", _names(self.predictor))
        object.__setattr__(self, "rankers", _names(self.rankers))
        object.__setattr__(self, "detectors", _names(self.detectors))
        object.__setattr__(self, "selector", self.selector or None)
        object.__setattr__(self, "params", {k: dict(v) for k, v in dict(self.params).items()})

    # -- what a stream of a task runs -------------------------------------------------------

    def predictor_for(self, task: str) -> str | None:
        """The first predictor candidate that serves ``task`` (``None``: none does)."""
        return next((n for n in self.predictor if _serves(n, task)), None)

    def rankers_for(self, task: str) -> list[str]:
        return [n for n in self.rankers if _serves(n, task)]

    def selector_for(self, task: str) -> str | None:
        return self.selector if self.selector and _serves(self.selector, task) else None

    def params_of(self, name: str) -> dict:
        return dict(self.params.get(name, {}))

    @property
    def model_name(self) -> str:
        """The predictor named in predictions before the stream's task is known."""
        return self.predictor[0] if self.predictor else "none"

    @property
    def arrivals(self) -> bool:
        """Whether the first predictor learns from feature arrivals (a stream of features,
        :mod:`worker.pipeline.feature_stream`) rather than from a stream of instances."""
        return bool(self.predictor) and _arrivals(self.predictor[0])

    # -- state ------------------------------------------------------------------------------

    def as_dict(self) -> dict:
        d = {f: getattr(self, f) for f in self.__dataclass_fields__}
        for key in ("predictor", "rankers", "detectors"):
            d[key] = list(d[key])
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> PipelineConfig:
        """The configuration a pipeline's state recorded (:meth:`as_dict`).

        A state comes from a checkpoint: the parameters the pipeline would build new
        learners with (a retrained predictor) must lie in the registry's ranges, like those
        of the learners it restores (``ValueError`` otherwise).
        """
        cfg = cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})
        if cfg.publish_rankings not in PUBLISH_RANKINGS:
            raise ValueError(f"publish_rankings must be one of {', '.join(PUBLISH_RANKINGS)}, "
                             f"not {cfg.publish_rankings!r}")
        for name, params in cfg.params.items():
            spec = registry.REGISTRY.get(name)
            if spec is not None:
                check_param_ranges(spec.cls.kind, params)
        return cfg


def _serves(name: str, task: str) -> bool:
    spec = registry.REGISTRY.get(name)
    return spec is not None and task in spec.tasks


def _arrivals(name: str) -> bool:
    spec = registry.REGISTRY.get(name)
    return spec is not None and spec.arrivals


def _role_problems(names: tuple, role: str, where: str) -> list[tuple[str, str]]:
    problems = []
    known = registry.names(role=role)
    for name in names:
        spec = registry.REGISTRY.get(name)
        if spec is None:
            problems.append((where, f"unknown learner {name!r}; the {role}s are: "
                                    f"{', '.join(known) or 'none'}"))
        elif role not in spec.roles:
            problems.append((where, f"{name} cannot be a {role}; the {role}s are: "
                                    f"{', '.join(known) or 'none'}"))
    return problems


def check_config(cfg: PipelineConfig) -> list[tuple[str, str]]:
    """Every problem of ``cfg``: ``[(field, what to fix)]``; empty when it is valid.

    ``field`` is a settings field name (``predictor``, ``params``, ...), with the learner and
    parameter for ``params`` (``params.forgetful_forest.n_treez``).

    Examples
    --------
    >>> check_config(PipelineConfig())
    []
    >>> check_config(PipelineConfig(detectors=["adwn"]))
    [('detectors', "unknown learner 'adwn'; the detectors are: adwin, ddm")]
    >>> [f for f, _ in check_config(PipelineConfig(predictor=["feature_stream", "naive_bayes"],
    ...                                             selector="abfs"))]
    ['predictor', 'selector']
    """
    problems: list[tuple[str, str]] = []
    if cfg.task not in TASK_CHOICES:
        problems.append(("task", f"must be one of {', '.join(TASK_CHOICES)}"))
    problems += _role_problems(cfg.predictor, PREDICTOR, "predictor")
    problems += _role_problems(_names(cfg.selector), SELECTOR, "selector")
    problems += _role_problems(cfg.rankers, RANKER, "rankers")
    problems += _role_problems(cfg.detectors, DETECTOR, "detectors")
    if problems:
        return problems
    if not cfg.predictor:
        problems.append(("predictor", "name at least one predictor"))
    elif cfg.task != AUTO and cfg.predictor_for(cfg.task) is None:
        problems.append(("predictor", f"the profile's task is {cfg.task} but none of "
                                      f"{', '.join(cfg.predictor)} serves it; the {cfg.task} "
                                      f"predictors are: "
                                      f"{', '.join(registry.names(PREDICTOR, cfg.task)) or 'none'}"))
    problems += _arrivals_problems(cfg)
    for label, value in (("batch_size", cfg.batch_size), ("ranking_every", cfg.ranking_every),
                         ("top_k", cfg.top_k)):
        if int(value) < 1:
            problems.append((label, "must be at least 1"))
    problems += _param_problems(cfg)
    return problems


def _arrivals_problems(cfg: PipelineConfig) -> list[tuple[str, str]]:
    """A learner of feature arrivals runs alone: its stream holds rows and learns per column.

    Such a stream learns only when a column arrives and runs no other learning stage, so a
    second predictor candidate or a selector would silently do nothing.
    """
    problems: list[tuple[str, str]] = []
    names = [n for n in cfg.predictor if _arrivals(n)]
    if not names:
        return problems
    name = names[0]
    others = [n for n in cfg.predictor if n != name]
    if others:
        problems.append(("predictor", f"{name} learns from feature arrivals (a stream of "
                                      f"features) and must be the only predictor; remove "
                                      f"{', '.join(others)} or give those streams a profile of "
                                      f"their own"))
    if cfg.selector:
        problems.append(("selector", f"a stream of features ({name}) takes no selector; "
                                     f"remove {cfg.selector}"))
    return problems


def _role_of(cfg: PipelineConfig, name: str) -> str:
    if name in cfg.predictor:
        return PREDICTOR
    if name in cfg.rankers:
        return RANKER
    if name == cfg.selector:
        return SELECTOR
    if name in cfg.detectors:
        return DETECTOR
    return sorted(registry.get(name).roles)[0]


def _param_problems(cfg: PipelineConfig) -> list[tuple[str, str]]:
    problems = []
    for name, params in cfg.params.items():
        if name not in registry.REGISTRY:
            problems.append((f"params.{name}", f"unknown learner {name!r}; known: "
                                               f"{', '.join(registry.names())}"))
            continue
        if not isinstance(params, Mapping):
            problems.append((f"params.{name}", "must be a map of parameter to value"))
            continue
        roles = [_role_of(cfg, name)]
        if name in cfg.predictor and name in cfg.rankers:
            roles.append(RANKER)  # one learner serves both: it must suit both
        for role in roles:
            for key, why in registry.check_params(name, params, role):
                problems.append((f"params.{name}" + (f".{key}" if key else ""), why))
    return problems

