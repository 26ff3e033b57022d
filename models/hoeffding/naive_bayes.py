"""Gaussian naive Bayes on a stream (MOA's ``bayes.NaiveBayes`` for numeric features)."""

from __future__ import annotations

import numpy as np

from ..core._jit import njit
from . import _hoeffding as hs
from ._gaussian_base import FLAVOURS, GaussianLearner, check_same_shape


@njit
def _learn_rows(X, y, w, mask, counts, g_w, g_mean, g_m2, g_min, g_max, n_seen, degenerate, out,
                k_known):
    """Learn the rows in order; with ``out`` of one row per row (test-then-train), each row is
    first predicted into ``out[i]`` by the model as it stands (zeros before any row), over the
    classes known by then (``k_known`` before the call, and those of the rows since)."""
    scores = np.zeros(counts.shape[1])
    k_now = k_known
    for i in range(X.shape[0]):
        if out.shape[0] and n_seen[0] > 0:
            hs.naive_bayes_log_joint(X[i], mask, counts[0, :k_now], g_w, g_mean, g_m2, 0,
                                     degenerate, scores[:k_now])
            hs.normalise_log(scores[:k_now], out[i, :k_now])
        k_now = max(k_now, y[i] + 1)
        n_seen[0] += 1
        wi = w[i]
        if wi <= 0.0:
            continue
        k = y[i]
        counts[0, k] += wi
        for f in range(X.shape[1]):
            if mask[f] != 0:
                hs.gaussian_update(g_w, g_mean, g_m2, g_min, g_max, 0, f, k, X[i, f], wi)


@njit
def _predict_rows(X, mask, degenerate, counts, g_w, g_mean, g_m2, out):
    scores = np.zeros(out.shape[1])
    for i in range(X.shape[0]):
        hs.naive_bayes_log_joint(X[i], mask, counts[0], g_w, g_mean, g_m2, 0, degenerate,
                                 scores)
        hs.normalise_log(scores, out[i])


class NaiveBayes(GaussianLearner):
    """Gaussian naive Bayes: ``P(c | x) ∝ P(c) prod_f N(x_f; mu_fc, sigma_fc)``.

    One weighted Gaussian estimator per (feature, class) and the class weights, exactly the
    statistics a Hoeffding tree leaf keeps (:mod:`models.hoeffding._hoeffding`); the products are
    computed in log space.

    Parameters
    ----------
    flavour : {"moa", "river"}, default "moa"
        How a class whose estimator has no spread (one value, or a constant feature) scores
        a value. ``"moa"``: MOA's point mass (density 1 at the mean, 0 elsewhere, so the
        class is ruled out by a different value); ``"river"``: the feature is left out of
        that class's product. The ABFS tables are MOA's, hence the default.
    classes : list, optional
        Labels known up front, in this order (class indices otherwise follow first
        appearance); gives the class order of an ARFF header.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 2)); y = (X[:, 0] > 0).astype(int)
    >>> nb = NaiveBayes()
    >>> nb.learn_many(X, y)
    >>> nb.predict_many(np.array([[2.0, 0.0], [-2.0, 0.0]]))
    [1, 0]

    References
    ----------
    Bifet, A., Holmes, G., Kirkby, R. and Pfahringer, B. (2010). MOA: Massive Online
    Analysis. JMLR 11, 1601-1604 (``moa.classifiers.bayes.NaiveBayes``).
    """

    kind = "naive_bayes"
    state_arrays = {"counts": ("<f8", 2), "mask": ("|u1", 1), "n_seen": ("<i8", 1),
                    **{name: ("<f8", 3) for name in hs.GAUSSIAN_FILL}}
    _class_axis = {"counts": (1, 0.0), **{n: (2, v) for n, v in hs.GAUSSIAN_FILL.items()}}

    def __init__(self, flavour: str = "moa", classes: list | None = None):
        if flavour not in FLAVOURS:
            raise ValueError(f"flavour must be one of {FLAVOURS}, got {flavour!r}")
        self.params = {"flavour": flavour, "classes": None if classes is None else list(classes)}
        self._degenerate = hs.DEGENERATE_POINT if flavour == "moa" else hs.DEGENERATE_SKIP
        self._init_common(classes)

    def _allocate(self, n_features: int, n_classes: int) -> None:
        self._arrays = {
            "counts": np.zeros((1, max(n_classes, 1))),
            "mask": np.ones(n_features, np.uint8),
            "n_seen": np.zeros(1, np.int64),
            **hs.allocate_gaussians(1, n_features, n_classes),
        }

    def _learn(self, X, codes, w, out=None, k_known: int = 0) -> None:
        a = self._arrays
        _learn_rows(X, codes, w, a["mask"], a["counts"], a["g_w"], a["g_mean"], a["g_m2"],
                    a["g_min"], a["g_max"], a["n_seen"], self._degenerate,
                    np.zeros((0, 0)) if out is None else out, k_known)

    def _proba(self, X, out) -> None:
        a = self._arrays
        full = np.zeros((X.shape[0], a["counts"].shape[1]))
        _predict_rows(X, a["mask"], self._degenerate, a["counts"], a["g_w"], a["g_mean"],
                      a["g_m2"], full)
        out[:] = full[:, :out.shape[1]]

    def importances(self) -> dict:
        """Naive Bayes ranks no features: an empty dict."""
        return {}

    def _check_state(self) -> None:
        a = self._arrays
        K = a["counts"].shape[1]
        check_same_shape(a, ["counts"], (1, K), self.kind)
        check_same_shape(a, ["n_seen"], (1,), self.kind)
        self._check_gaussians(1)
