"""Feature importances of a multi-target regression stream that follow drift at its own speed.

The block-forest ranker of :mod:`models.block_forest` with CART regression trees
(:mod:`models._cart_regression`) in place of classification trees: every ``stride`` rows a
small forest learns the latest ``block_size`` rows and targets, its impurity importances are
one measurement, and each feature's importance is the mean of its measurements over the
memory the block-forest ranker's rule chooses for it (by default a mixture of windows
weighted by how well each predicted the feature's next independent measurement).
"""

from __future__ import annotations

import numpy as np

from . import _block_cart
from . import _cart_regression as cr
from .base import check_targets
from .block_forest import BlockRanker


class BlockForestRegressionRanker(BlockRanker):
    """Ranks the features of a multi-target regression stream by block-forest importances
    averaged over a memory chosen per feature.

    Everything but the block forests is :class:`~models.block_forest.BlockForestRanker`: the
    same parameters, defaults, memory rule and noise estimate. A block forest here is
    ``n_trees`` CART regression trees, each on a bootstrap of the block and (``mtry``) a
    random subset of the features, splitting on the squared error summed over the targets;
    each target is standardised on the block first, so that every target counts alike
    whatever its scale (Breiman 2001; a multi-output forest as in scikit-learn, whose
    impurity is the mean squared error over the outputs).

    Parameters
    ----------
    block_size, stride, n_trees, max_depth, mtry, max_blocks, kappa, noise, seed, memory, \
    rate, weights, paired_eta, long_prior, eta, corr_eta, pool, young_prior, young_blocks, \
    longest
        As :class:`~models.block_forest.BlockForestRanker`.

    Notes
    -----
    Why a second ranker for regression streams: iSOUP-SymRF's symbolic ranking (Osojnik,
    Panov & Džeroski 2020) sums ``0.5 ** depth`` over the split nodes of trees that only
    grow, so it cannot see a feature lose its importance; on the rotating-weight regression
    streams of ``tests/benchmarks/bench_rankings_drift_regression.py`` (17 settings, 10
    streams each) it scores 0.057 on average (Cassidy & Deviney's correlation with the true
    weights; -0.22 to +0.27 per setting), this ranker 0.732 (0.57 to 0.84), a forest
    refitted on the last 300 rows at every ask 0.702. This ranker is at least the best of
    the 100-, 300- and 1,000-row windows at 10 settings (by up to 0.020) and below it at 7,
    by 0.002-0.041 (the most at the two fastest clipped walks, where a 100-row window wins,
    and at the slowest ones; ``tests/benchmarks/results/rankings_drift_regression.md``).
    The defaults are the classification ranker's, not tuned here. The former defaults
    scored: candidates of powers of two up to 256 measurements (``longest`` 0) 0.733, at
    least the best window at the same 10 settings (the longest candidate of 192 gained
    0.0005-0.0022 at the four slowest settings and lost up to 0.0016 elsewhere); the
    paired weights with each feature on its own evidence (``pool`` 0) 0.732, at least the
    best window at 7 settings (pooling gained 0.004-0.005 at the four slowest settings and
    lost up to 0.012, at the fastest clipped walk with two drifting weights);
    weights relative to the best loss times the correlations 0.731 (the paired
    weights gained 0.001-0.008 at the four slowest settings and lost 0.005 at the
    fastest clipped walk with five drifting weights); squared errors alone 0.726; Lepski's
    rule on blocks of 200 rows 0.670. Cost: the worker's default regression pipeline on
    Bike Sharing (12 features, 3 targets) runs 6,130-7,170 rows/s in process, 7,150-8,560
    unpooled, 8,750-11,580 under Lepski's rule and 17,190-31,670 without a ranker (the
    machine's load varied within the run), in one run
    (``tests/benchmarks/bench_ranker_cost.py``, ``results/ranker_cost.md``).

    References
    ----------
    .. [1] L. Breiman, J. Friedman, R. Olshen, C. Stone, "Classification and regression
       trees", Wadsworth, 1984.
    .. [2] O. V. Lepski, "Asymptotically minimax adaptive estimation I", Theory of
       Probability and its Applications 36(4), 1991.

    Examples
    --------
    Only feature 0 drives the targets for the first 2,000 rows, only feature 2 after them:

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((4000, 4))
    >>> first = np.arange(4000) < 2000
    >>> Y = np.column_stack([np.where(first, X[:, 0], X[:, 2]),
    ...                      np.where(first, X[:, 0] ** 2, 10 * X[:, 2] ** 2)])
    >>> ranker = BlockForestRegressionRanker(seed=1)
    >>> ranker.learn_many(X[:2000], Y[:2000])
    >>> int(np.argmax(ranker.importances()["mdi"]))
    0
    >>> ranker.learn_many(X[2000:], Y[2000:])
    >>> int(np.argmax(ranker.importances()["mdi"]))
    2
    """

    kind = "block_forest_regression"
    state_arrays = {**BlockRanker.state_arrays, "block_y": ("<f8", 2)}

    @property
    def n_targets(self) -> int | None:
        """Targets of the stream, ``None`` before the first rows."""
        return int(self._arrays["block_y"].shape[1]) if self._arrays else None

    def _encode_y(self, X: np.ndarray, y) -> np.ndarray:
        return check_targets(X, y, self.n_targets)

    def _block_importances(self, X: np.ndarray,
                           Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """MDI of a regression forest grown on one block, and the variance of that mean over
        the trees (the ``trees`` noise)."""
        p, T, d = self.params, self.params["n_trees"], X.shape[1]
        sd = Y.std(axis=0)
        Z = np.ascontiguousarray((Y - Y.mean(axis=0)) / np.where(sd > 0, sd, 1.0))
        raw = np.zeros((T, d))
        cr.forest_decreases(X, Z, self._sorted_columns(), T, p["mtry"],
                            _block_cart.split_features(d), p["max_depth"], self._arrays["rng"],
                            raw)
        total = raw.sum()
        forest = raw.sum(axis=0) / total if total > 0 else np.zeros(d)
        tree_totals = raw.sum(axis=1, keepdims=True)
        per_tree = np.divide(raw, tree_totals, out=np.zeros_like(raw), where=tree_totals > 0)
        return forest, per_tree.var(axis=0) / T

    def _check_block_y(self, held: np.ndarray) -> None:
        if not np.isfinite(held).all():
            raise ValueError(f"{self.kind} state: a held target is not finite")
