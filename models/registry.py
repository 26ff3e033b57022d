"""The one list of learner families: what each is, serves and reports.

Every learner the worker can run is one :class:`LearnerSpec` in :data:`REGISTRY`, keyed by
its name (the name users write in settings, the ``model`` of a prediction, the ``source``
of an alert). Settings validation, the worker's pipeline factory, the numba warm-up and the
learner contract suite all read this registry; nothing else names learners. Adding a family
is one module plus one :func:`register` call at the bottom of this file.

A spec declares

* ``tasks``: the learning tasks it serves (:data:`CLASSIFICATION`, :data:`REGRESSION`);
  detectors watch a per-row loss in ``[0, 1]`` and serve both;
* ``roles``: :data:`PREDICTOR` (``learn_many``, ``predict_many``, and for classifiers
  ``predict_proba_many`` and ``classes``), :data:`RANKER` (``learn_many``, ``importances()``),
  :data:`SELECTOR` (``learn_many``, ``selected()``: the chosen columns in selection order,
  empty while none is chosen; the predictor sees those, or every column when none) and
  :data:`DETECTOR` (``update_many`` over the loss sequence);
* ``rankings``: which ``importances()`` keys it publishes, and under which ranking method;
* ``events``: the kinds of :class:`~models.core.base.LearnerEvent` its ``events()`` reports
  after a ``learn_many`` (none: ``events()`` is never asked);
* ``alerts``: which of its events the worker publishes as drift alerts, as
  :class:`AlertRule` s (a bare kind: every event of that kind, at its own level); events of
  other kinds, and events a rule holds back, are only counted
  (``streamforest_learner_events_total``). ``None`` publishes every event. A detector's
  kinds are its signals, ``"drift"`` and (with ``warnings``) ``"warning"``;
* ``composes``: for a selector, the class that puts a stream's predictor behind it,
  ``composes(predictor, selector)``: a learner with the predictor's surface and the
  selector as its ``selector`` attribute (ABFS: :class:`~models.hoeffding.abfs.ABFSClassifier`, the
  reference code's composition: the predictor sees the selected columns, and after a feature
  drift a fresh one is trained on the selector's window);
* ``warnings``: a detector that also flags warning zones
  (``update_many(x, return_warnings=True)`` and ``warning_detected``);
* ``arrivals``: a predictor that learns one generation per arriving feature column; its
  streams hold their rows and take FeatureArrivals (each arrival calls ``learn_many(X, y)``
  with every held labelled row, ``X`` one column wider than the time before);
* ``defaults``: constructor arguments the worker uses beyond the class defaults;
  ``role_params``: arguments a role requires (a ranker must track importances);
* ``small_params``: small arguments for the contract suite and the warm-up;
* ``ranges`` (not an argument: those of the class's state ``kind``, declared in
  :mod:`models.core._ranges`): the closed range ``(low, high)`` of each parameter that sizes the
  learner's work or memory (trees, split candidates, depth, windows). Settings outside it stop
  the worker at start, and a checkpointed state carrying a value outside it is refused
  (:func:`models.core.base.check_param_ranges`): a checkpoint is read from a topic, and
  ``n_splits=10**6`` would make 300 rows take minutes.

Examples
--------
>>> spec = get("online_random_forest")
>>> sorted(spec.roles), dict(spec.rankings)
(['predictor', 'ranker'], {'mda': 'orf_mda', 'mdg': 'orf_mdg'})
>>> names(role=DETECTOR)
['adwin', 'ddm']
>>> check_params("forgetful_forest", {"n_treez": 3}, PREDICTOR)
[('n_treez', 'unknown parameter of forgetful_forest; did you mean n_trees?')]
>>> [r.kind for r in get("ddm").alerts]
['drift']
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .cart.block_forest import BlockForestRanker
from .cart.block_forest_regression import BlockForestRegressionRanker
from .cart.feature_stream_forest import FeatureStreamForest
from .core._ranges import ranges_of_kind
from .drift.adwin import ADWIN
from .drift.ddm import DDM
from .forgetful.forgetful_forest import ForgetfulRandomForest
from .forgetful.forgetful_tree import ForgetfulDecisionTree
from .hoeffding.abfs import ABFS, ABFSClassifier
from .hoeffding.adaptive_forest import AdaptiveRandomForest
from .hoeffding.hoeffding_tree import HoeffdingTree
from .hoeffding.naive_bayes import NaiveBayes
from .isoup.isoup_forest import ISOUPSymRF
from .isoup.isoup_tree import ISOUPTree
from .orf.online_forest import OnlineRandomForest

CLASSIFICATION = "classification"
REGRESSION = "regression"
TASKS = (CLASSIFICATION, REGRESSION)

PREDICTOR = "predictor"
RANKER = "ranker"
SELECTOR = "selector"
DETECTOR = "detector"
ROLES = (PREDICTOR, RANKER, SELECTOR, DETECTOR)


def _frozen(mapping: Mapping | None) -> Mapping:
    return MappingProxyType(dict(mapping or {}))


#: alert levels, weakest first
LEVELS = ("warning", "drift")


@dataclass(frozen=True)
class AlertRule:
    """When the events of one kind become drift alerts (the rest are only counted).

    Parameters
    ----------
    kind : str
        The event kind (for a detector: ``"drift"`` or ``"warning"``).
    share : float, default 0
        Fraction of the learner's members (the trees of a forest) that must be involved in
        one ``learn_many`` for its event to qualify (0: every event qualifies).
    involved, members : str
        Names of the learner's attributes giving, after a ``learn_many``, the members involved
        in it and the members in all (``members=""``: one).
    quiet : int, default 0
        Instances. A qualifying event fewer than ``quiet`` instances after the previous
        qualifying one continues the same episode: it is published only if its level is
        above every level the episode had (a warning that turns into a drift), else counted.
        A condition that persists is announced once, when it starts.
    level : str, optional
        Level of the published alert (default: the event's own).

    Examples
    --------
    A quarter of a 20-tree forest is 5 trees:

    >>> rule = AlertRule("collapse", share=0.25, involved="n_collapsed", members="n_trees",
    ...                  quiet=1000)
    >>> rule.qualifies(4, 20), rule.qualifies(5, 20)
    (False, True)

    An episode opened by a warning at instance 1499 takes a drift 100 instances later, but
    no further warning or drift until 1000 instances pass without qualifying events:

    >>> episode, published = None, []
    >>> for position, level in [(1499, "warning"), (1599, "drift"), (2099, "warning"),
    ...                         (2999, "drift"), (4099, "warning")]:
    ...     ok, episode = rule.step(position, level, episode)
    ...     published.append(ok)
    >>> published
    [True, True, False, False, True]
    """

    kind: str
    share: float = 0.0
    involved: str = ""
    members: str = ""
    quiet: int = 0
    level: str | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.share <= 1.0 or self.quiet < 0:
            raise ValueError(f"alert rule {self.kind!r}: share must be in [0, 1] and quiet >= 0")
        if self.share and not self.involved:
            raise ValueError(f"alert rule {self.kind!r}: a share needs the involved attribute")
        if self.level not in (None, *LEVELS):
            raise ValueError(f"alert rule {self.kind!r}: level must be one of {LEVELS}")

    def qualifies(self, involved: int, members: int) -> bool:
        """Whether ``involved`` of ``members`` is a large enough share."""
        return involved >= self.share * members

    def step(self, position: int, level: str, episode: tuple | None) -> tuple[bool, tuple]:
        """Whether a qualifying event at ``position`` of ``level`` is published, and the
        episode after it: ``(position of its last event, highest level)``, ``None`` before
        the first."""
        if episode is None or position - episode[0] >= self.quiet:
            return True, (position, level)
        rises = LEVELS.index(level) > LEVELS.index(episode[1])
        return rises, (position, level if rises else episode[1])


def _rules(alerts: tuple | None) -> tuple | None:
    """``alerts`` as :class:`AlertRule` s (a bare kind: every event of it)."""
    if alerts is None:
        return None
    return tuple(a if isinstance(a, AlertRule) else AlertRule(a) for a in alerts)


@dataclass(frozen=True)
class LearnerSpec:
    """What the worker knows about one learner family (see the module doc)."""

    name: str
    cls: type
    tasks: frozenset
    roles: frozenset
    summary: str
    rankings: tuple = ()  # ((importances() key, ranking method), ...)
    events: tuple = ()
    alerts: tuple | None = None  # AlertRules (or bare kinds) of published events; None: all
    composes: Any = None
    warnings: bool = False
    arrivals: bool = False
    defaults: Mapping = field(default_factory=dict)
    role_params: Mapping = field(default_factory=dict)  # role -> {param: required value}
    small_params: Mapping = field(default_factory=dict)
    # param -> (low, high), both included: those of the class's state kind (models/core/_ranges.py)
    ranges: Mapping = field(init=False)

    def __post_init__(self) -> None:
        bad_tasks = set(self.tasks) - set(TASKS)
        bad_roles = set(self.roles) - set(ROLES)
        if bad_tasks or bad_roles or not self.tasks or not self.roles:
            raise ValueError(f"learner {self.name!r}: tasks must be among {TASKS} and roles "
                             f"among {ROLES} (got {sorted(self.tasks)}, {sorted(self.roles)})")
        if self.rankings and RANKER not in self.roles:
            raise ValueError(f"learner {self.name!r} publishes rankings but is no ranker")
        if self.arrivals and PREDICTOR not in self.roles:
            raise ValueError(f"learner {self.name!r} learns from feature arrivals but is no "
                             "predictor")
        for name in ("defaults", "small_params", "role_params"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        object.__setattr__(self, "ranges", ranges_of_kind(getattr(self.cls, "kind", "")))
        object.__setattr__(self, "alerts", _rules(self.alerts))
        self._check_alerts()
        self._check_ranges()

    def _check_ranges(self) -> None:
        """Ranges name parameters of the class, and its defaults lie inside them."""
        known = self.parameters
        for name, (lo, hi) in self.ranges.items():
            default = {**{k: p.default for k, p in known.items()}, **self.defaults}.get(name)
            if name not in known or not lo <= hi or (
                    isinstance(default, int | float) and not lo <= default <= hi):
                raise ValueError(f"learner {self.name!r}: range of {name!r} names no parameter, "
                                 f"is empty or leaves out the default {default!r}")

    def _check_alerts(self) -> None:
        """Rules name kinds this learner reports and attributes its class has."""
        kinds = set(self.events)
        if DETECTOR in self.roles:
            kinds |= {"drift", "warning"} if self.warnings else {"drift"}
        for rule in self.alerts or ():
            missing = [a for a in (rule.involved, rule.members) if a and not hasattr(self.cls, a)]
            if rule.kind not in kinds or missing:
                raise ValueError(f"learner {self.name!r}: alert rule {rule.kind!r} names an "
                                 f"unknown kind or attribute (kinds {sorted(kinds)}, missing "
                                 f"{missing})")

    @property
    def parameters(self) -> dict[str, inspect.Parameter]:
        """Constructor parameters by name (``self`` and ``*args`` excluded)."""
        sig = inspect.signature(self.cls.__init__)
        return {n: p for n, p in sig.parameters.items()
                if n != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}

    @property
    def seeded(self) -> bool:
        """Whether the learner takes a ``seed`` (given by the worker, never by settings)."""
        return "seed" in self.parameters

    def kwargs(self, params: Mapping | None, roles=(), seed: int | None = None) -> dict:
        """Constructor arguments: worker defaults, then ``params``, then what ``roles`` need."""
        out = {**self.defaults, **(params or {})}
        for role in roles:
            out.update(self.role_params.get(role, {}))
        if self.seeded and seed is not None:
            out["seed"] = int(seed)
        return out

    def build(self, params: Mapping | None = None, roles=(), seed: int | None = None):
        """A new learner of this family."""
        return self.cls(**self.kwargs(params, roles, seed))


REGISTRY: dict[str, LearnerSpec] = {}

#: what a stream runs when no profile says otherwise (the defaults of ``learners.*``):
#: predictor candidates by task, rankers and detectors
DEFAULT_PREDICTORS = ("adaptive_random_forest", "isoup_symrf")
DEFAULT_RANKERS = ("block_forest", "block_forest_regression", "isoup_symrf")
DEFAULT_DETECTORS = ("adwin",)


def register(spec: LearnerSpec) -> LearnerSpec:
    """Add a family (its name must be new)."""
    if spec.name in REGISTRY:
        raise ValueError(f"a learner named {spec.name!r} is registered already")
    REGISTRY[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Remove a family (tests that register a learner of their own clean up with it)."""
    REGISTRY.pop(name, None)


def get(name: str) -> LearnerSpec:
    """The spec of ``name``; ``KeyError`` with the known names otherwise."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown learner {name!r}; known: {', '.join(sorted(REGISTRY))}") from None


def names(role: str | None = None, task: str | None = None) -> list[str]:
    """Registered names, sorted, optionally only those serving ``role`` and ``task``."""
    return sorted(n for n, s in REGISTRY.items()
                  if (role is None or role in s.roles) and (task is None or task in s.tasks))


def _type_problem(value: Any, default: Any) -> str | None:
    """Why ``value`` cannot stand where the default is ``default`` (``None``: it can)."""
    if default is inspect.Parameter.empty or default is None:
        return None
    if isinstance(default, bool):
        ok = isinstance(value, bool)
        want = "true or false"
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
        want = "an integer"
    elif isinstance(default, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        want = "a number"
    elif isinstance(default, str):
        ok = isinstance(value, str)
        want = "a string"
    else:
        return None
    return None if ok else f"must be {want}, got {value!r}"


def _shown(value: Any) -> str:
    """A value as users write it in settings (JSON: ``true``, not ``True``)."""
    return {True: "true", False: "false", None: "null"}.get(value, repr(value)) \
        if isinstance(value, bool | None) else repr(value)


def _range_problem(bounds: tuple | None, value: Any) -> str | None:
    """Why ``value`` is outside ``bounds`` (``None``: it is inside, or nothing bounds it)."""
    if bounds is None or value is None:
        return None
    lo, hi = bounds
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"must be a number in [{lo}, {hi}], got {_shown(value)}"
    return None if lo <= value <= hi else f"must be in [{lo}, {hi}], got {value!r}"


def check_params(name: str, params: Mapping, role: str) -> list[tuple[str, str]]:
    """Problems of ``params`` for learner ``name`` in ``role``: ``[(parameter, what to fix)]``.

    Unknown names (with the closest known one), values of the wrong type or outside the
    spec's ranges, values that contradict what the role needs, and values the learner's
    constructor refuses.
    """
    spec = get(name)
    known = spec.parameters
    problems = []
    for key, value in params.items():
        if key == "seed" and spec.seeded:
            problems.append((key, "the seed comes from learners.seed and the stream id; "
                                  "it cannot be set per learner"))
        elif key not in known:
            hint = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
            fix = f"did you mean {hint[0]}?" if hint else f"known: {', '.join(sorted(known))}"
            problems.append((key, f"unknown parameter of {name}; {fix}"))
        else:
            why = _type_problem(value, known[key].default) or _range_problem(
                spec.ranges.get(key), value)
            if why:
                problems.append((key, why))
    required = spec.role_params.get(role, {})
    for key, value in required.items():
        if key in params and params[key] != value:
            problems.append((key, f"must be {_shown(value)} when {name} is a {role}"))
    if not problems:
        try:
            spec.build(params, (role,), seed=0)
        except (TypeError, ValueError) as exc:
            problems.append(("", f"{name} refuses these parameters: {exc}"))
    return problems


# --------------------------------------------------------------------------- the families

register(LearnerSpec(
    name="forgetful_forest", cls=ForgetfulRandomForest,
    tasks=frozenset({CLASSIFICATION}), roles=frozenset({PREDICTOR}),
    summary="forgetful random forest (Yuan, Sun & Shasha 2023): predictions under drift",
    # a tree whose batch accuracy falls to chance forgets all its rows (Sec. 3.2): in a forest
    # that is each tree's own housekeeping, and on a hard stream (accuracy near chance) a few
    # trees do it every batch. A quarter of the forest at one mini-batch is published (the
    # event's level: a warning, a drift from half the trees on); while such batches keep
    # coming, each within 1000 instances of the last, they are one episode, announced once
    # and again only if it turns from warning to drift
    events=("collapse",),
    alerts=(AlertRule("collapse", share=0.25, involved="n_collapsed", members="n_trees",
                      quiet=1000),),
    small_params={"n_trees": 4, "bagging": True, "dense_max_values": 4},
))
register(LearnerSpec(
    name="forgetful_tree", cls=ForgetfulDecisionTree,
    tasks=frozenset({CLASSIFICATION}), roles=frozenset({PREDICTOR}),
    summary="forgetful decision tree (Yuan, Sun & Shasha 2023)",
    # the one tree forgetting all its rows is the whole model starting over (the event is a
    # drift): published once per episode, as for the forest
    events=("collapse",),
    alerts=(AlertRule("collapse", quiet=1000),),
    small_params={"dense_max_values": 4},
))
register(LearnerSpec(
    name="online_random_forest", cls=OnlineRandomForest,
    tasks=frozenset({CLASSIFICATION}), roles=frozenset({PREDICTOR, RANKER}),
    summary="Online Random Forest (Saffari 2009) with online MDA/MDG (Cassidy & Deviney 2014)",
    rankings=(("mda", "orf_mda"), ("mdg", "orf_mdg")),
    role_params={RANKER: {"track_importance": True}},
    small_params={"n_trees": 4, "n_tests": 8, "min_samples": 5, "max_depth": 5,
                  "gamma": 0.002, "track_importance": True, "importance_decay": 0.001},
))
register(LearnerSpec(
    name="adwin", cls=ADWIN,
    tasks=frozenset(TASKS), roles=frozenset({DETECTOR}),
    summary="ADWIN (Bifet & Gavalda 2007) on the prequential loss",
    alerts=("drift",),
))
register(LearnerSpec(
    name="ddm", cls=DDM,
    tasks=frozenset(TASKS), roles=frozenset({DETECTOR}), warnings=True,
    summary="DDM (Gama et al. 2004) on the prequential loss, with warning zones",
    # the warning level is where DDM starts keeping examples in case the drift level follows;
    # most zones end without one (Electricity: 285 zone entries, 83 drifts): counted only
    alerts=("drift",),
))
register(LearnerSpec(
    name="feature_stream", cls=FeatureStreamForest,
    tasks=frozenset({CLASSIFICATION}), roles=frozenset({PREDICTOR, RANKER}),
    summary="random forest on a stream of features (Motl & Kordik 2019): a generation of trees "
            "per feature arrival",
    rankings=(("mdi", "feature_stream"),), arrivals=True,
    # every learn_many adds a generation: an always-on stream keeps the newest 20 (600 trees)
    defaults={"max_generations": 20},
    small_params={"n_trees": 4},
))
register(LearnerSpec(
    name="naive_bayes", cls=NaiveBayes,
    tasks=frozenset({CLASSIFICATION}), roles=frozenset({PREDICTOR}),
    summary="Gaussian naive Bayes (MOA's NaiveBayes)",
))
register(LearnerSpec(
    name="hoeffding_tree", cls=HoeffdingTree,
    tasks=frozenset({CLASSIFICATION}), roles=frozenset({PREDICTOR}),
    summary="Hoeffding tree (Domingos & Hulten 2000), river/MOA defaults",
    small_params={"grace_period": 50},
))
register(LearnerSpec(
    name="abfs", cls=ABFS,
    tasks=frozenset({CLASSIFICATION}), roles=frozenset({SELECTOR, RANKER}),
    summary="ABFS feature selection (Barddal et al. 2019) with BOLE order and omega (Assis)",
    rankings=(("abfs", "abfs"),),
    # a layer's detector firing names the feature that stopped helping: a drift; a changed
    # subset is the selector at work, counted only
    events=("feature_drift", "selection"), alerts=("feature_drift",), composes=ABFSClassifier,
    small_params={"grace_period": 50, "selection_threshold": 0.05},
))
register(LearnerSpec(
    name="isoup_tree", cls=ISOUPTree,
    tasks=frozenset({REGRESSION}), roles=frozenset({PREDICTOR}),
    summary="iSOUP-Tree (Osojnik, Panov & Dzeroski 2018): multi-target Hoeffding model tree",
    small_params={"grace_period": 50, "max_thresholds": 16},
))
register(LearnerSpec(
    name="isoup_symrf", cls=ISOUPSymRF,
    tasks=frozenset({REGRESSION}), roles=frozenset({PREDICTOR, RANKER}),
    summary="iSOUP-SymRF (Osojnik, Panov & Dzeroski 2020): bagged iSOUP trees with random "
            "subspaces per leaf and the symbolic feature ranking",
    rankings=(("symbolic", "symrf"),),
    small_params={"n_models": 3, "grace_period": 50, "max_thresholds": 16},
))
register(LearnerSpec(
    name="adaptive_random_forest", cls=AdaptiveRandomForest,
    tasks=frozenset({CLASSIFICATION}), roles=frozenset({PREDICTOR, RANKER}),
    summary="adaptive random forest (Gomes et al. 2017): ARF-10 of Hoeffding trees with "
            "per-tree ADWIN warning/drift detectors and background trees",
    rankings=(("split_gain", "arf_split_gain"),),
    # every tree's ADWIN watches its own bootstrap error, so single trees are replaced all
    # the time (Electricity, demo stream as the worker runs it: 205 replacements in 124 of
    # its 453 mini-batches; the demo hyperplane: 29 in 28 of 300, never more than 2 at
    # once). A change that hits the concept replaces many trees at once: 3 or more of the
    # 10 at one mini-batch is published as a drift, once per episode (1000 instances).
    # Measured on the demo streams: Electricity 13 alerts (19 without the episode, 124 for
    # any replacement; the worker's ADWIN on the prequential loss: 55), hyperplane 0 (its
    # gradual rotation replaces trees one at a time; ADWIN: 4). Warnings (background trees
    # started; Electricity 168 mini-batches) are counted only, as DDM's warning zones
    events=("tree_drift", "tree_warning"),
    alerts=(AlertRule("tree_drift", share=0.3, involved="n_drifted", members="n_models",
                      quiet=1000),),
    small_params={"n_models": 3, "grace_period": 20},
))

register(LearnerSpec(
    name="block_forest", cls=BlockForestRanker,
    tasks=frozenset({CLASSIFICATION}), roles=frozenset({RANKER}),
    summary="importances that follow drift at its own speed: a random forest per block of rows, "
            "each feature's block importances averaged over a mixture of memories weighted by "
            "how much worse than the best each predicted its next independent measurement, in "
            "standard errors of the paired difference, half of that evidence pooled over the "
            "stream's features",
    rankings=(("mdi", "block_mdi"),),
    small_params={"block_size": 20, "stride": 5, "n_trees": 4, "max_blocks": 8},
))

register(LearnerSpec(
    name="block_forest_regression", cls=BlockForestRegressionRanker,
    tasks=frozenset({REGRESSION}), roles=frozenset({RANKER}),
    summary="block_forest for multi-target regression streams: CART regression trees per block "
            "of rows, each feature's block importances averaged over a mixture of memories",
    rankings=(("mdi", "block_mdi"),),
    small_params={"block_size": 20, "stride": 5, "n_trees": 4, "max_blocks": 8},
))
