"""Feature importances of a multi-target regression stream that follow drift at its own speed.

The block-forest ranker of :mod:`models.cart.block_forest` with CART regression trees
(:mod:`models.cart._cart_regression`) in place of classification trees: every ``stride`` rows a
small forest learns the latest ``block_size`` rows and targets, its impurity importances are
one measurement, and each feature's importance is the mean of its measurements over the
window mixture of the block-forest ranker. Its measurements are in
``docs/research/block_forest.md``.
"""

from __future__ import annotations

import numpy as np

from ..core.base import check_targets
from . import _block_cart
from . import _cart_regression as cr
from .block_forest import BlockRanker


class BlockForestRegressionRanker(BlockRanker):
    """Ranks the features of a multi-target regression stream by block-forest importances
    averaged over a memory chosen per feature.

    Everything but the block forests is :class:`~models.cart.block_forest.BlockForestRanker`: the
    same parameters, defaults and window mixture. A block forest here is
    ``n_trees`` CART regression trees, each on a bootstrap of the block and (``mtry``) a
    random subset of the features, splitting on the squared error summed over the targets;
    each target is standardised on the block first, so that every target counts alike
    whatever its scale (Breiman 2001; a multi-output forest as in scikit-learn, whose
    impurity is the mean squared error over the outputs).

    Parameters
    ----------
    block_size, stride, n_trees, max_depth, mtry, max_blocks, seed, rate, paired_eta, \
    long_prior, eta, pool, longest
        As :class:`~models.cart.block_forest.BlockForestRanker`.

    Notes
    -----
    Why a second ranker for regression streams: iSOUP-SymRF's symbolic ranking (Osojnik,
    Panov & Džeroski 2020) sums ``0.5 ** depth`` over the split nodes of trees that only
    grow, so it cannot see a feature lose its importance. The defaults are the
    classification ranker's, not tuned here. Its measurements on rotating-weight regression
    streams (against iSOUP-SymRF and sliding-window forests) and its cost are in
    ``docs/research/block_forest.md``.

    References
    ----------
    .. [1] L. Breiman, J. Friedman, R. Olshen, C. Stone, "Classification and regression
       trees", Wadsworth, 1984.

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

    def _block_importances(self, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """MDI of a regression forest grown on one block: each feature's share of the
        forest's total decrease of the standardised targets' squared error."""
        p, T, d = self.params, self.params["n_trees"], X.shape[1]
        sd = Y.std(axis=0)
        Z = np.ascontiguousarray((Y - Y.mean(axis=0)) / np.where(sd > 0, sd, 1.0))
        raw = np.zeros((T, d))
        cr.forest_decreases(X, Z, self._sorted_columns(), T, p["mtry"],
                            _block_cart.split_features(d), p["max_depth"], self._arrays["rng"],
                            raw)
        total = raw.sum()
        return raw.sum(axis=0) / total if total > 0 else np.zeros(d)

    def _check_block_y(self, held: np.ndarray) -> None:
        if not np.isfinite(held).all():
            raise ValueError(f"{self.kind} state: a held target is not finite")
