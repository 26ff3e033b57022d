"""The ranges of the parameters that size a learner's work or memory, by the kind of its state.

Trees, split candidates, depth, windows: settings outside a range stop the worker at start
(:func:`models.registry.check_params`), and a checkpointed state carrying a value outside it is
refused before the learner is built (:func:`models.core.base.check_param_ranges`): a checkpoint is
read from a topic, and ``n_splits=10**6`` would make 300 rows take minutes. Each registry spec
takes the ranges of its class's ``kind`` from here (:attr:`models.registry.LearnerSpec.ranges`);
this module imports no learner, so the learners' restore reads it without the registry.

Examples
--------
>>> dict(ranges_of_kind("hoeffding_tree"))
{'n_splits': (1, 1000), 'max_depth': (0, 64)}
>>> dict(ranges_of_kind("naive_bayes"))
{}
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# generous (ten to a hundred times the defaults), so that no configuration that finishes its
# rows in reasonable time is refused
_TREES = (1, 1000)  # trees of a forest: work and memory grow with each
_SPLITS = (1, 1000)  # candidate thresholds per feature and split attempt
_DEPTH = (0, 64)  # a depth limit (None: none; rows bound the trees then)

_BLOCK_FOREST = {"block_size": (10, 100_000), "n_trees": _TREES, "max_depth": (1, 20),
                 "max_blocks": (1, 100_000), "longest": (0, 100_000)}

#: state kind -> {parameter: (low, high)}, both bounds included
RANGES: Mapping[str, Mapping] = MappingProxyType({kind: MappingProxyType(ranges) for kind, ranges in {
    "forgetful_forest": {"n_trees": _TREES, "dense_max_values": (0, 256)},
    "forgetful_tree": {"dense_max_values": (0, 256)},
    "online_random_forest": {"n_trees": _TREES, "n_tests": _SPLITS, "max_depth": (1, 40)},
    "adwin": {"max_buckets": (1, 1000)},
    "feature_stream_forest": {"n_trees": _TREES, "max_depth": (1, 20),
                              "max_generations": (0, 10_000)},
    "hoeffding_tree": {"n_splits": _SPLITS, "max_depth": _DEPTH},
    "abfs": {"n_splits": _SPLITS, "grace_period": (1, 100_000)},
    "isoup_tree": {"max_thresholds": (1, 1024), "max_depth": _DEPTH},
    "isoup_symrf": {"n_models": _TREES, "max_thresholds": (1, 1024), "max_depth": _DEPTH},
    "adaptive_random_forest": {"n_models": _TREES, "n_splits": _SPLITS, "max_depth": _DEPTH,
                               "lambda_value": (0.0, 30.0)},
    "block_forest": _BLOCK_FOREST,
    "block_forest_regression": _BLOCK_FOREST,
}.items()})

_NO_RANGES: Mapping = MappingProxyType({})


def ranges_of_kind(kind: str) -> Mapping:
    """The parameter ranges of learners whose states have ``kind`` (none for a kind without
    any: a learner nested in another's state is bounded by its own family)."""
    return RANGES.get(kind, _NO_RANGES)
