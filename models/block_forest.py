"""Feature importances that follow drift at its own speed: block forests and a memory per feature.

Every ``stride`` rows, a small random forest (the CART trees of :mod:`models._cart`) learns
the latest ``block_size`` rows; its impurity importances (MDI, Breiman 2001) are one
*measurement* of what matters now. A feature's importance is a mean of its recent
measurements over a memory chosen per feature, so each feature gets the memory its own drift
allows. By default the memory is a mixture of windows weighted by how much worse each window
predicted the feature's next independent measurement than the best one, in standard errors
of their paired difference, half of that evidence pooled over the stream's features
(exponential weights, Vovk 1990; Cesa-Bianchi & Lugosi 2006);
Lepski's rule (in the intersection-of-confidence-intervals form
of Goldenshluger & Nemirovski 1997) is the other choice. Multi-target regression streams get
the same ranker with regression trees (:mod:`models.block_forest_regression`).
"""

from __future__ import annotations

import numpy as np

from . import _cart
from . import _fmath as fm
from ._rng import seed_states
from ._trees import grow_axis
from .base import (
    Classifier,
    ClassIndex,
    Learner,
    check_index,
    check_param_ranges,
    check_shapes,
    check_X,
)

_SALT = 0xB10C
_FIRST_ROWS = 16  # measurements held at first; the ring doubles up to max_blocks' worth


class BlockRanker(Learner):
    """The ring of rows, the block measurements and the memory rules (the window mixture,
    Lepski's rule) shared by the block-forest rankers (not used directly; parameters as
    :class:`BlockForestRanker`).

    A subclass says what a row's label is (:meth:`_encode_y`, :meth:`_check_block_y`,
    ``state_arrays["block_y"]``) and grows a block's forest (:meth:`_block_importances`).
    """

    #: ``block_y`` holds class indices here; a subclass may hold other labels (targets)
    state_arrays = {"block_x": ("<f8", 2), "block_y": ("<i8", 1), "ring": ("<i8", 1),
                    "history": ("<f8", 2), "spread": ("<f8", 2), "n_blocks": ("<i8", 1),
                    "losses": ("<f8", 2), "loss_cross": ("<f8", 3),
                    "pred_moments": ("<f8", 3),
                    "target_moments": ("<f8", 2), "rng": ("<u8", 1), "n_seen": ("<i8", 1)}

    def __init__(self, block_size: int = 100, stride: int = 10, n_trees: int = 10,
                 max_depth: int = 4, mtry: float = 1.0, max_blocks: int = 64,
                 kappa: float = 1.5, noise: str = "trees", seed: int = 1,
                 memory: str = "mixture", rate: float = 0.001, weights: str = "paired",
                 paired_eta: float = 3.0, long_prior: float = 0.25, eta: float = 0.5,
                 corr_eta: float = 0.0, pool: float = 0.5, young_prior: float = 0.0,
                 young_blocks: float = 50.0, longest: int = 192):
        if int(block_size) < 10:
            raise ValueError("block_size must be >= 10")
        if not 1 <= int(stride) <= int(block_size):
            raise ValueError("stride must be in [1, block_size]")
        if int(n_trees) < 1:
            raise ValueError("n_trees must be >= 1")
        if not 1 <= int(max_depth) <= 20:
            raise ValueError("max_depth must be in [1, 20]")
        if not 0.0 < float(mtry) <= 1.0:
            raise ValueError("mtry must be in (0, 1]")
        if int(max_blocks) < 1:
            raise ValueError("max_blocks must be >= 1")
        if not float(kappa) > 0.0:
            raise ValueError("kappa must be > 0")
        if noise not in ("trees", "differences"):
            raise ValueError("noise must be 'trees' or 'differences'")
        if memory not in ("mixture", "lepski"):
            raise ValueError("memory must be 'mixture' or 'lepski'")
        if not 0.0 < float(rate) <= 1.0:
            raise ValueError("rate must be in (0, 1]")
        if weights not in ("paired", "relative"):
            raise ValueError("weights must be 'paired' or 'relative'")
        if not float(paired_eta) > 0.0:
            raise ValueError("paired_eta must be > 0")
        if not float(long_prior) >= 0.0:
            raise ValueError("long_prior must be >= 0 (0: no prior)")
        if not float(eta) > 0.0:
            raise ValueError("eta must be > 0")
        if not float(corr_eta) >= 0.0:
            raise ValueError("corr_eta must be >= 0 (0: no correlation criterion)")
        if not 0.0 <= float(pool) <= 1.0:
            raise ValueError("pool must be in [0, 1] (0: every feature on its own evidence)")
        if not float(young_prior) >= 0.0:
            raise ValueError("young_prior must be >= 0 (0: none)")
        if not float(young_blocks) > 0.0:
            raise ValueError("young_blocks must be > 0 (measurements)")
        if int(longest) < 0:
            raise ValueError("longest must be >= 0 (measurements; 0: the largest power of two "
                             "up to half of those kept)")
        self.params = {"block_size": int(block_size), "stride": int(stride),
                       "n_trees": int(n_trees),
                       "max_depth": int(max_depth), "mtry": float(mtry),
                       "max_blocks": int(max_blocks), "kappa": float(kappa), "noise": noise,
                       "seed": int(seed), "memory": memory, "rate": float(rate),
                       "weights": weights, "paired_eta": float(paired_eta),
                       "long_prior": float(long_prior), "eta": float(eta),
                       "corr_eta": float(corr_eta), "pool": float(pool),
                       "young_prior": float(young_prior), "young_blocks": float(young_blocks),
                       "longest": int(longest)}
        self._arrays: dict[str, np.ndarray] = {}
        self._init_labels()

    # ------------------------------------------------------------------ properties

    @property
    def n_features(self) -> int | None:
        """Features of the stream, ``None`` before the first rows."""
        return int(self._arrays["block_x"].shape[1]) if self._arrays else None

    @property
    def n_blocks(self) -> int:
        """Completed blocks (block forests trained) so far."""
        return int(self._arrays["n_blocks"][0]) if self._arrays else 0

    @property
    def window_blocks(self) -> np.ndarray:
        """Per feature: how many recent measurements its importance averages now (under
        ``memory="mixture"``, the windows' lengths weighted as the mixture weighs them)."""
        if self.params["memory"] == "lepski":
            return self._select()[1]
        R = self._recent()
        counts = np.minimum(self._windows(), max(R.shape[0], 1)).astype(np.float64)
        # a sum over the windows in their order, not a matrix product: BLAS picks its
        # kernel (and so its rounding) by the CPU
        return (counts[:, None] * self._weights()).sum(axis=0) if R.shape[0] \
            else np.zeros(self.n_features or 0)

    def memory_bytes(self) -> int:
        """Bytes held by the state arrays."""
        return int(sum(a.nbytes for a in self._arrays.values()))

    # ------------------------------------------------------------------ learning

    @property
    def learn_every(self) -> int:
        """Rows between two measurements (``stride``): the importances change only then."""
        return int(self.params["stride"])

    def learn_many(self, X, y) -> None:
        """Add labelled rows; every ``stride`` rows, once a block is full, train a forest on
        the last ``block_size`` rows."""
        X = check_X(X, self.n_features)
        if X.shape[0] == 0:
            return
        if y is None:
            raise ValueError(f"{type(self).__name__} needs labels: y must not be None")
        codes = self._encode_y(X, y)
        if not self._arrays:
            self._allocate(X.shape[1], codes)
        a, p = self._arrays, self.params
        B, S = p["block_size"], p["stride"]
        ring = a["ring"]  # [next slot, rows held, rows since the last measurement]
        start = 0
        while start < X.shape[0]:
            # rows up to the next measurement, written without wrapping past the ring's end
            due = S - ring[2] if ring[1] == B else B - ring[1]
            take = min(due, X.shape[0] - start, B - ring[0])
            a["block_x"][ring[0]:ring[0] + take] = X[start:start + take]
            a["block_y"][ring[0]:ring[0] + take] = codes[start:start + take]
            ring[0] = (ring[0] + take) % B
            full = ring[1] == B
            ring[1] = min(B, ring[1] + take)
            ring[2] += take
            start += take
            if ring[1] == B and (not full or ring[2] >= S):
                self._measure()
        a["n_seen"][0] += X.shape[0]

    def _allocate(self, n_features: int, rows_y: np.ndarray) -> None:
        B = self.params["block_size"]
        self._arrays = {"block_x": np.zeros((B, n_features)),
                        "block_y": np.zeros((B, *rows_y.shape[1:]), rows_y.dtype),
                        "ring": np.zeros(3, np.int64),
                        "history": np.zeros((min(_FIRST_ROWS, self._history_rows()), n_features)),
                        "spread": np.zeros((min(_FIRST_ROWS, self._history_rows()), n_features)),
                        "n_blocks": np.zeros(1, np.int64),
                        "losses": np.zeros((len(self._windows()), n_features)),
                        "loss_cross": np.zeros((len(self._windows()),) * 2 + (n_features,)),
                        "pred_moments": np.zeros((3, len(self._windows()), n_features)),
                        "target_moments": np.zeros((3, n_features)),
                        "rng": seed_states(self.params["seed"], 1, _SALT),
                        "n_seen": np.zeros(1, np.int64)}

    def _history_rows(self) -> int:
        """Measurements kept: ``max_blocks`` blocks' worth of strides."""
        p = self.params
        return max(1, p["max_blocks"] * p["block_size"] // p["stride"])

    def _measure(self) -> None:
        """Train a forest on the last block of rows, keep its importances (a ring)."""
        a = self._arrays
        n, K, cap = int(a["n_blocks"][0]), a["history"].shape[0], self._history_rows()
        if n >= K and K < cap:
            # the ring starts small and doubles until it holds max_blocks' worth: a young
            # stream keeps only what it measured; a ring that never wrapped keeps its order
            for name in ("history", "spread"):
                a[name] = grow_axis(a[name], min(2 * K, cap))
        slot = n % a["history"].shape[0]
        a["history"][slot], a["spread"][slot] = self._block_importances(a["block_x"],
                                                                         a["block_y"])
        a["ring"][2] = 0
        a["n_blocks"][0] += 1
        if self.params["memory"] == "mixture":
            self._score_windows()

    # ------------------------------------------------------------------ the mixture

    def _windows(self) -> np.ndarray:
        """Candidate memories, in measurements: 1, 2, 4, ... below ``longest``, then
        ``longest``, at most half the kept ones (so a window and the gap before the
        measurement it predicts fit in the ring); ``longest`` 0: 1, 2, 4, ... up to half the
        kept ones."""
        top = max(1, self._history_rows() // 2)
        powers = 2 ** np.arange(top.bit_length())  # 1, 2, 4, ... up to top (integers)
        longest = min(self.params["longest"], top)
        if longest <= 0:
            return powers
        return np.append(powers[powers < longest], longest)

    def _gap(self) -> int:
        """Measurements between two that share no rows: ``ceil(block_size / stride)``."""
        return -(-self.params["block_size"] // self.params["stride"])

    @staticmethod
    def _window_means(R: np.ndarray, windows: np.ndarray) -> np.ndarray:
        """Means of the newest ``w`` rows of ``R`` (all of them when fewer), per window."""
        counts = np.minimum(windows, R.shape[0])
        return np.cumsum(R, axis=0)[counts - 1] / counts[:, None]

    def _score_windows(self) -> None:
        """Fade every window's loss and add its squared error on the newest measurement,
        predicted by the window that ended ``gap`` measurements earlier (whose trees saw
        none of the newest block's rows, so the error is drift plus independent noise);
        fade the products of the windows' errors (:meth:`_paired_scores`) and the moments of
        those predictions and targets (:meth:`_correlations`) alike."""
        R, g = self._recent(), self._gap()
        if R.shape[0] <= g:
            return
        a, rate = self._arrays, self.params["rate"]
        pred, target = self._window_means(R[g:], self._windows()), R[0]
        err = (pred - target) * (pred - target)
        for name, new in (("losses", err), ("loss_cross", err[:, None] * err[None, :]),
                          ("pred_moments", np.stack([pred, pred * pred, pred * target])),
                          ("target_moments", np.stack([np.ones_like(target), target,
                                                       target * target]))):
            a[name] *= 1.0 - rate
            a[name] += rate * new

    def _weights(self) -> np.ndarray:
        """Each window's weight per feature, normalized: ``exp(-P_k + prior log(w_k) /
        log(w_max))`` (the prior of :meth:`_prior`) with the penalty ``P_k = max(z_k /
        paired_eta, (L_k - L_min) / (eta L_min))`` under ``weights="paired"``
        (:meth:`_paired_scores`), ``exp(-P_k)`` with
        ``P_k = (L_k - L_min) / (eta L_min)`` under ``"relative"``; the penalties are first
        shrunk toward their mean over the features, ``(1 - pool) P_k + pool mean_f P_k``
        (the features whose measurements ever moved: a constant one has no evidence);
        either times ``exp((rho_k - rho_max) / corr_eta)`` when ``corr_eta`` > 0
        (:meth:`_correlations`)."""
        p, L = self.params, self._arrays["losses"]
        best = L.min(axis=0)
        logw = -(L - best) / (p["eta"] * best + 1e-12)
        if p["weights"] == "paired":
            logw = np.minimum(logw, -self._paired_scores() / p["paired_eta"])
        # the stream's features usually drift at one speed: each feature's evidence is
        # shrunk toward the features' mean (the young stream's thin evidence most of all);
        # a feature no block ever split on has no evidence and stays out of the mean
        seen = L.max(axis=0) > 0.0
        if p["pool"] > 0.0 and seen.any():
            shared = logw[:, seen].mean(axis=1, keepdims=True)
            logw = (1.0 - p["pool"]) * logw + p["pool"] * shared
        if p["weights"] == "paired":
            windows = self._windows()
            # the core's log and exp (models._fmath): numpy's differ with AVX-512
            top = fm.log(float(windows[-1])) if windows[-1] > 1 else 1.0
            logw = logw + self._prior() * (fm.log_array(windows) / top)[:, None]
        if p["corr_eta"] > 0.0:
            rho = self._correlations()
            logw = logw + (rho - rho.max(axis=0)) / p["corr_eta"]
        w = fm.exp_array(logw - logw.max(axis=0))
        return w / w.sum(axis=0)

    def _prior(self) -> float:
        """The log-weight the longest candidate gets over the shortest one: ``long_prior``,
        plus ``young_prior`` fading by ``e`` every ``young_blocks`` measurements (a young
        stream's memory grows with it, as a window that has not filled does, until evidence
        of drift builds up)."""
        p = self.params
        return p["long_prior"] + p["young_prior"] * fm.exp(-(self.n_blocks - 1)
                                                           / p["young_blocks"])

    def _fade_mass(self) -> tuple[float, float]:
        """The faded means' gathered weight and the sum of its squared parts after the
        windows' ``n`` scored measurements: ``1 - (1 - r)^n`` and ``r^2 (1 - (1 - r)^(2n)) /
        (1 - (1 - r)^2)``; their ratio ``mass^2 / squares`` is the faded mean's effective
        number of measurements (``n`` while ``n`` is small beside ``1 / r``, ``(2 - r) / r``
        in the long run)."""
        r = self.params["rate"]
        n = max(0, self.n_blocks - self._gap())
        # powers by repeated squaring: Python's float ** int calls the C library's pow
        mass = 1.0 - fm.ipow(1.0 - r, n)
        squares = r * r * (1.0 - fm.ipow(1.0 - r, 2 * n)) / (1.0 - (1.0 - r) * (1.0 - r))
        return mass, squares

    def _paired_scores(self) -> np.ndarray:
        """Per window and feature: how many standard errors its faded loss lies above the
        best window's, ``z_k = (L_k - L_b) / se(L_k - L_b)`` (0 for the best; 0 everywhere
        before any error is scored).

        The two windows' errors are paired (they predict the same measurements), so the
        target's noise, common to both, cancels from the difference and from its standard
        error: ``se^2 = Var(e_k^2 - e_b^2) / n_eff``, the variance from the faded products
        of the windows' squared errors, ``n_eff`` the faded mean's effective number of
        measurements (:meth:`_fade_mass`). Consecutive measurements share rows, so the
        errors are correlated and ``n_eff`` overstates the independent ones; the
        temperature ``paired_eta`` absorbs that factor.
        """
        a = self._arrays
        mass, squares = self._fade_mass()
        if mass <= 0.0:
            return np.zeros_like(a["losses"])
        m1, m2 = a["losses"] / mass, a["loss_cross"] / mass
        cols = np.arange(m1.shape[1])
        b = m1.argmin(axis=0)
        own = np.einsum("kkf->kf", m2)
        diff = m1 - m1[b, cols]
        var = own - 2.0 * m2[:, b, cols] + own[b, cols] - diff * diff
        se = np.sqrt(np.maximum(var, 0.0) * squares) / mass
        return np.where(diff > 0.0, diff / np.maximum(se, 1e-300), 0.0)

    def _correlations(self) -> np.ndarray:
        """Per window and feature: the faded correlation between the window's predictions
        and the measurements they predicted (0 before any, or when either is constant).

        The faded moments are divided by the weight they have gathered so far: otherwise a
        young stream's moments are shrunk toward zero and every correlation inflates.
        """
        pm, tm = self._arrays["pred_moments"], self._arrays["target_moments"]
        mass = tm[0]
        if not (mass > 0.0).all():
            return np.zeros_like(pm[0])
        mp, mp2, mpt = pm / mass
        mt, mt2 = tm[1:] / mass
        var = (mp2 - mp * mp) * (mt2 - mt * mt)
        cov = mpt - mp * mt
        ok = var > 1e-30
        return np.where(ok, cov / np.sqrt(np.where(ok, var, 1.0)), 0.0)

    def _mixture(self) -> np.ndarray:
        """Per feature: the windows' means weighted by :meth:`_weights`."""
        means = self._window_means(self._recent(), self._windows())
        return (self._weights() * means).sum(axis=0)

    # ------------------------------------------------------------------ importances

    def _recent(self, name: str = "history") -> np.ndarray:
        """The kept measurements, newest first: shape ``(kept, F)``."""
        a = self._arrays
        n, K = self.n_blocks, a[name].shape[0]
        kept = min(n, K)
        slots = (n - 1 - np.arange(kept)) % K
        return a[name][slots]

    def _select(self) -> tuple[np.ndarray, np.ndarray]:
        """Per feature: the intersection-of-intervals mean and its window (in measurements)."""
        H = self._recent()
        F = self.n_features or 0
        if H.shape[0] == 0:
            return np.zeros(F), np.zeros(F, np.int64)
        B, S = self.params["block_size"], self.params["stride"]
        s = self._noise(H)
        kappa = self.params["kappa"]
        lo, hi = np.full(F, -np.inf), np.full(F, np.inf)
        alive = np.ones(F, bool)
        value, window = H[0].copy(), np.ones(F, np.int64)
        k = 1
        while k <= H.shape[0] and alive.any():
            m = H[:k].mean(axis=0)
            # k measurements cover B + (k - 1) S rows: the error of a forest on that many
            half = kappa * s * np.sqrt(B / (B + (k - 1) * S))
            lo, hi = np.maximum(lo, m - half), np.minimum(hi, m + half)
            alive &= lo <= hi
            value = np.where(alive, m, value)
            window = np.where(alive, k, window)
            k *= 2
        return value, window

    def _noise(self, H: np.ndarray) -> np.ndarray:
        """Standard deviation of one measurement, per feature (see ``noise``)."""
        if self.params["noise"] == "trees":
            return np.sqrt(self._recent("spread").mean(axis=0))
        B, S = self.params["block_size"], self.params["stride"]
        lag = min(-(-B // S), H.shape[0] - 1)
        if lag <= 0:
            return np.zeros(H.shape[1])
        d = H[lag:] - H[:-lag]
        return np.sqrt(0.5 * np.mean(d * d, axis=0))

    def importances(self) -> dict:
        """``{"mdi": array}``: per feature, its block importances averaged over the memory
        the ``memory`` rule chose (see the class doc). Empty before the first block
        completes."""
        if self.n_blocks == 0:
            return {}
        if self.params["memory"] == "lepski":
            return {"mdi": self._select()[0]}
        return {"mdi": self._mixture()}

    # ------------------------------------------------------------------ state

    @classmethod
    def from_state(cls, state: dict):
        """Rebuild from :meth:`to_state`. A state written before the mixture existed has no
        ``memory`` parameter and no losses: it continues under Lepski's rule, as written. One
        written before the paired weights has no ``weights`` parameter: it continues with the
        weights relative to the best loss (``weights="relative"``), its own ``rate``, ``eta``
        and ``corr_eta`` (0 when it has none: it was written before the correlations). One
        written before ``longest`` keeps its candidates, powers of two (``longest`` 0)."""
        params, arrays = state.get("params") or {}, state.get("arrays") or {}
        lacked: list[str] = []  # arrays the writing version did not have: they start at zero
        if "memory" not in params:
            params = {**params, "memory": "lepski", "rate": 0.005, "eta": 0.3}
            lacked.append("losses")
        if "corr_eta" not in params:
            # written before the correlation criterion: it continues without it
            params = {**params, "corr_eta": 0.0}
            lacked += ["pred_moments", "target_moments"]
        if "weights" not in params:
            # written before the paired weights: it continues with the relative ones
            params = {**params, "weights": "relative"}
            lacked.append("loss_cross")
        if "pool" not in params:
            # written before the pooled evidence: each feature keeps its own
            params = {**params, "pool": 0.0}
        if "young_prior" not in params:
            # written before the young stream's prior: it continues without it
            params = {**params, "young_prior": 0.0}
        if "longest" not in params:
            # written before the longest candidate was a setting: powers of two, as written
            params = {**params, "longest": 0}
        if lacked and "history" in arrays:
            check_param_ranges(cls.kind, params)  # before a learner is built with them
            K = len(cls(**params)._windows())
            F = np.asarray(arrays["history"]).shape[1]
            shapes = {"losses": (K, F), "loss_cross": (K, K, F), "pred_moments": (3, K, F),
                      "target_moments": (3, F)}
            arrays = {**{k: np.zeros(shapes[k]) for k in lacked if k not in arrays}, **arrays}
        return super().from_state({**state, "params": params, "arrays": arrays})

    def _check_state(self) -> None:
        a, B = self._arrays, self.params["block_size"]
        F = a["block_x"].shape[1]
        K = a["history"].shape[0]
        check_shapes(a, {"block_x": (B, F), "block_y": (B, *a["block_y"].shape[1:]),
                         "ring": (3,), "history": (K, F),
                         "spread": (K, F), "n_blocks": (1,),
                         "losses": (len(self._windows()), F),
                         "loss_cross": (len(self._windows()),) * 2 + (F,),
                         "pred_moments": (3, len(self._windows()), F),
                         "target_moments": (3, F), "rng": (1,), "n_seen": (1,)})
        for name, what in (("losses", "window losses"),
                           ("loss_cross", "products of the windows' errors")):
            if not (np.isfinite(a[name]).all() and (a[name] >= 0.0).all()):
                raise ValueError(f"{self.kind} state: {what} must be finite and >= 0")
        pm, tm = a["pred_moments"], a["target_moments"]
        if not (np.isfinite(pm).all() and np.isfinite(tm).all() and (pm[1] >= 0.0).all()
                and (tm[2] >= 0.0).all() and ((tm[0] >= 0.0) & (tm[0] <= 1.0)).all()):
            raise ValueError(f"{self.kind} state: window moments must be finite, squares >= 0 "
                             "and weights in [0, 1]")
        if not 1 <= K <= self._history_rows() or (K < self._history_rows()
                                                  and a["n_blocks"][0] > K):
            raise ValueError(f"{self.kind} state: {K} history rows for "
                             f"{int(a['n_blocks'][0])} blocks")
        check_index(a["ring"][:1], 0, B, "ring")
        check_index(a["ring"][1:], 0, B + 1, "ring")
        check_index(a["n_blocks"], 0, np.iinfo(np.int64).max, "n_blocks")
        self._check_block_y(a["block_y"][:int(a["ring"][1])])

    # ------------------------------------------------------------------ what subclasses say

    def _init_labels(self) -> None:
        """Whatever the labels need before the first row."""
        return None

    def _encode_y(self, X: np.ndarray, y) -> np.ndarray:
        """What the block keeps of each row's label (one entry per row)."""
        raise NotImplementedError

    def _block_importances(self, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One block's forest importances and their variance over the trees."""
        raise NotImplementedError

    def _check_block_y(self, held: np.ndarray) -> None:
        """Raise ``ValueError`` when a held label is invalid."""
        raise NotImplementedError


class BlockForestRanker(BlockRanker, Classifier):
    """Ranks features by block-forest importances averaged over a memory chosen per feature.

    *The mixture* (``memory="mixture"``, the default). The candidate memories are the newest
    ``k = 1, 2, 4, ..., 128`` and ``192`` measurements (``longest``; at most half of those
    kept). Each candidate keeps, per
    feature, a faded mean ``L_k`` (rate ``rate``) of its squared error in predicting the
    newest measurement from the ``k`` measurements that ended ``g = ceil(block_size /
    stride)`` measurements before it: those share no rows with the newest block, so the
    error is the drift over the gap plus independent noise, and a memory that is too short
    pays for its noise, one too long for the drift it averages in. A feature's importance
    is the candidates' means weighted by exponential weights (Vovk 1990; Cesa-Bianchi &
    Lugosi 2006, ch. 2), normalised. Under a fast drift the short memories predict best and
    carry the weight; under a slow drift or none the long ones do, and average the block
    forests' noise away.

    *The weights* (``weights="paired"``, the default). Every candidate's loss contains the
    noise of the measurement it predicts, the same for all of them, so the losses differ by
    a few percent where the drift is slow. What tells two candidates apart is their paired
    difference: they predict the same measurements, so that noise cancels from ``L_k -
    L_b`` (``b`` the best candidate) and from its standard error, estimated from the faded
    products of the candidates' squared errors and the faded mean's effective number of
    measurements. A candidate ``z_k = (L_k - L_b) / se`` standard errors worse weighs
    ``exp(-max(z_k / paired_eta, (L_k - L_b) / (eta L_b)) + long_prior log(k) / log(k_max))``,
    the penalty pooled over the stream's features (``pool``):

    * ``z_k / paired_eta``: the evidence against the candidate. It sharpens as the evidence
      grows (a long stream under slow drift) and stays soft while it is thin;
    * ``(L_k - L_b) / (eta L_b)``, the loss relative to the best: after an abrupt change the
      long candidates' errors jump, and their variance with them, so their ``z`` grows
      slowly while their relative loss is large at once (on the switching stream of
      ``tests/models/test_block_forest.py``, the switched features' memory falls from 62
      measurements to 11 within 300 rows; to 47 by ``z`` alone; 6 and 36 with each
      feature on its own evidence, ``pool`` 0);
    * ``long_prior``: where the candidates cannot be told apart, the longer ones, which
      average more noise away, are preferred (up to ``long_prior`` in log-weight);
    * ``pool``: the features of one stream usually drift at one speed, so half of each
      feature's penalty (``pool`` 0.5) is the mean of the penalties over the stream's
      features. Evidence per feature is thinnest on a young stream, where the mixture gave
      the short candidates about a third of the weight on slowly drifting features (the
      noise that cost the slowest settings most of their gap to the best window); the
      pooled evidence settles sooner. The price: after an abrupt change of some features
      only, theirs follow about 100 rows later (on that switching stream, 11 measurements
      after 300 rows instead of 6) and the untouched ones' memories shorten for a while
      (64 measurements instead of 126).

    ``weights="relative"`` keeps the relative term alone, optionally times ``exp((rho_k -
    rho_max) / corr_eta)`` with ``rho_k`` the faded correlation between the candidate's
    predictions and the measurements they predicted (``corr_eta`` > 0; it applies to the
    paired weights too): the default before, with ``eta`` 0.25 and ``corr_eta`` 0.3.

    *Lepski's rule* (``memory="lepski"``, an earlier default, kept for comparison and for
    checkpoints written before the mixture). The noise ``s`` of one measurement is the
    spread of the feature's importance across the forest's trees divided by
    ``sqrt(n_trees)``, averaged over the kept measurements. For ``k = 1, 2, 4, ...`` recent
    measurements, covering ``L = block_size + (k - 1) stride`` rows, the mean ``m_k`` has
    the interval ``m_k +- kappa s sqrt(block_size / L)``; the feature's importance is ``m_k``
    for the largest ``k`` whose interval meets all the shorter ones.

    Parameters
    ----------
    block_size : int, default 100
        Rows each block forest learns (the latest ``block_size`` rows).
    stride : int, default 10
        Rows between two block forests: blocks overlap when it is below ``block_size``
        (a measurement is at most ``stride`` rows old; measurements ``block_size / stride``
        apart share no rows).
    n_trees : int, default 10
        Trees per block forest (bagged CART trees).
    max_depth : int, default 4
        Depth limit of the block trees.
    mtry : float, default 1.0
        Expected fraction of the features each tree may split on (a random subspace per tree,
        at least one feature); 1: every tree sees every feature and the trees differ by
        their bootstraps.
    max_blocks : int, default 64
        Measurements kept: ``max_blocks`` blocks' worth (``max_blocks * block_size /
        stride``; 640 by default). A candidate memory is at most half of them.
    kappa : float, default 1.5
        Lepski's rule only: width of the intervals in standard errors.
    noise : {"trees", "differences"}, default "trees"
        Lepski's rule only: how the noise of one measurement is estimated, from the spread
        across the block forest's trees, or from measurements that share no rows (half
        their mean squared difference, which counts drift as noise too).
    seed : int, default 1
        Master seed: the learner is deterministic given the seed and the stream.
    memory : {"mixture", "lepski"}, default "mixture"
        How each feature's memory is chosen (above).
    rate : float, default 0.001
        The mixture's fading rate of the candidates' losses, their products and their
        correlations (about the last 1,000 measurements, 10,000 rows by default, weigh in).
    weights : {"paired", "relative"}, default "paired"
        How the mixture weighs the candidates' losses (above).
    paired_eta : float, default 3.0
        Paired weights: a candidate whose loss is ``paired_eta`` standard errors above the
        best one's weighs ``1/e`` of it (before the prior).
    long_prior : float, default 0.25
        Paired weights: the log-weight the longest candidate gets over the shortest one,
        growing with the log of the length (0: none).
    eta : float, default 0.5
        The temperature relative to the best loss: a candidate whose loss is ``eta`` times
        the best one's above it weighs at most ``1/e`` of the best one (both weights).
    corr_eta : float, default 0.0
        The temperature of the correlations: a candidate whose correlation is ``corr_eta``
        below the best one's weighs ``1/e`` as much, on top of its losses' factor; 0 leaves
        the correlations out.
    pool : float, default 0.5
        The share of each feature's penalty (the exponent of its weights, before the prior
        and the correlations) taken from the mean over the stream's features (those whose
        measurements ever moved: a feature no block splits on has no evidence): 0, every
        feature on its own evidence (the default before); 1, one memory for the whole
        stream (both weights).
    young_prior : float, default 0.0
        Paired weights: extra log-weight for the longest candidate over the shortest one
        (growing with the log of the length, as ``long_prior``) on a young stream, fading by
        ``e`` every ``young_blocks`` measurements: until evidence of drift builds up, the
        memory grows with the stream, as a window that has not filled does. 0: none. For
        streams known to drift slowly; it costs the fast ones (3 over 50 measurements, see
        the Notes: +0.001 at the slowest setting, -0.002 to -0.008 at faster ones).
    young_blocks : float, default 50.0
        The young prior's fading scale, in measurements (500 rows by default).
    longest : int, default 192
        The longest candidate memory, in measurements (2,010 rows by default): the
        candidates are 1, 2, 4, ... below it, then it, at most half of those kept (see the
        Notes). 0: powers of two up to half of those kept (256 by default, the rule before).

    Notes
    -----
    Measured on the rotating hyperplanes of ``tests/benchmarks/bench_rankings_drift.py``
    (17 settings, drift speeds 1e-4 to 1e-2 per row, clipped and unclipped walks, abrupt
    switches; Cassidy & Deviney's correlation with the true weights; the final table is in
    ``tests/benchmarks/results/rankings_drift.md``):

    * *The default, 10 streams per setting:* at least the best of six sliding-window random
      forests (100, 300 and 1,000 rows; impurity and permutation importance, refitted at
      every ask) at all 17 settings, by 0.002-0.032 (the least at the slowest unclipped walk
      with two drifting weights, 0.742 against 0.739, and at the walks of 0.003 with two
      drifting weights); above MOA's ARF importances everywhere, by 0.23-0.34; mean 0.663.
      On 20 streams per setting (``results/rankings_drift_s1-20.md``): at least the best
      window at all 17, by 0.001-0.037; mean 0.665. Twenty more streams (21-40) at the nine
      settings with the smallest margins (``results/rankings_drift_longest_s1-40.md``): on
      all 40, at least the best window at all nine, by 0.001-0.013 (the slowest one 0.783
      against 0.782, standard error 0.006). Sixty more (41-100) at the slowest one
      (``results/rankings_drift_slowest_s1-100.md``): on all 100, 0.784 against 0.781
      (standard error 0.003). The defaults before: candidates of powers of two up to 256
      measurements (``longest`` 0) were 0.002 below the best window at that setting on 10
      streams, 0.0004 on 20 and 0.002 on 40, 0.0015 above it on 100, and at least level at
      the other 16 (means 0.663 and 0.665; the longest candidate, below); the paired weights
      with each feature on its own evidence (``pool`` 0) had the same miss, by 0.003 on 10
      streams and 0.004 on 20 (means 0.661 and 0.663); weights relative to the best loss
      times the correlations (``weights="relative"``, ``eta`` 0.25, ``corr_eta`` 0.3) were
      below the best window at the four slowest settings, by 0.002-0.010 (mean 0.657); by
      squared errors alone (``rate`` 0.005, ``eta`` 0.3) at 7 settings (0.653); Lepski's
      rule on blocks of 200 rows every 25 at all 17 (by up to 0.13).
    * *Why pooled evidence* (replayed, ``results/memory_rules.md`` on streams 1-10 and
      ``results/memory_rules_s11-20.md`` on streams 11-20). At the slowest unclipped walk,
      the unpooled mixture gave the candidates of 1-16 measurements a third of the weight on
      the drifting features over the first eighth of a stream, and 8% later; keeping them
      out of the first quarter alone would have lifted that setting from 0.765 to 0.778 on
      streams 1-20, while dropping the 256-measurement candidate lowered it: its gap was
      noise on a young stream, not lag. Pooling half the penalty moved the replayed mean gap
      to the best window from +0.015 to +0.017 (streams 1-10) and from +0.011 to +0.014
      (11-20), and the smallest from -0.002 and -0.007 to -0.001 on both; the fastest
      clipped walks keep +0.005 and +0.013. A quarter: smallest -0.002 and -0.004; 0.8 and 1
      (one memory per stream): at least level at only 12-14 settings, down to -0.014. Also
      tried, each trading the slowest settings against the fastest clipped ones (slowest
      and fastest clipped, streams 1-10): a stronger prior toward long candidates while the
      evidence is young (``young_prior`` 1: +0.004 and -0.026); a prior uniform in the log of
      the rows a candidate covers (the shortest candidates overlap: +0.004 and -0.030);
      errors on the mean of the next 4 or 16 measurements (sharper evidence: +0.000 and
      -0.008, +0.001 and -0.056); a penalty growing with ``z^2`` for large ``z`` (-0.003 and
      -0.022); ``long_prior`` 0.4 or ``eta`` 0.35 with the pooling (level at the slowest
      settings, but below the best window at 2-3 others on each half; measured on 20 streams,
      ``long_prior`` 0.4 was 0.001 above the best window at the slowest setting and 0.002
      below it at the clipped walk of 0.003 with two drifting weights).
    * *What limits it* (same replays, ``results/memory_rules.md``, last table). The
      criterion, each window's error on the measurement ``g`` ahead, ranks the windows as the
      score does where the truth moves slowly: at the slowest unclipped walk, 128
      measurements first and 256 2% worse, whose plain means score 0.749 and 0.693. Where a
      clipped walk bounces fast, the truth is unpredictable ``g`` measurements (100 rows)
      ahead: the criterion ranks the longest window first (4 measurements 23% worse), the
      score a short one (2-4 measurements 0.52, 256 0.15). The mixture stays above the
      windows there because its weights stay soft where the evidence is thin; the rules above
      that gain at the slowest settings (a stronger prior toward long candidates on young
      streams, a prior in rows, errors on the mean of later measurements) all pull weight
      toward the criterion's long choice and lose at the fastest clipped walks. Other shapes
      of the same evidence lost too (slowest and fastest clipped, streams 1-10): one window
      of the mixture's mean log-length instead of the mixture (-0.014 and -0.078);
      exponentially faded means as candidates, rate ``2 / (k + 1)``, the steady-state filter
      of a random walk in noise (-0.015 and +0.018); recent evidence beside the long-run one
      (losses faded at 0.01 too, with a handicap: -0.004 and +0.005).
    * *Where the slowest setting lost: a young stream* (``young_prior``; measured with the
      candidates up to 256). Over the last
      three quarters of each stream the mixture scores above the best fixed memory at the
      slowest unclipped walk with two drifting weights (0.756 against 0.753 for 128
      measurements, replayed on streams 1-20); over the first quarter it is far below (0.533
      against 0.598): on a young stream the evidence is thin, the weights stay flat, and the
      short candidates' noise costs what a window that has not filled does not pay. A prior
      toward long candidates fading over the first few hundred rows (``young_prior`` 3,
      ``young_blocks`` 50: e-folding after 500 rows) was the best of a grid of 21 replayed
      on streams 1-20 (strengths 0.5-12, scales 15-200 measurements; its smallest gap to the
      best window +0.001). In the benchmark, with the default's own seeds (``--profile``),
      the trade stayed: on 20 streams per setting it lifted the slowest setting by 0.003
      (standard error 0.001) and lowered the fast ones by 0.002-0.007, so the mean stayed at
      0.665 and the setting below the best window moved to the clipped walk of 0.003 with
      two drifting weights (0.001 below); on 40 streams at the nine settings of the
      40-stream report it lifted the two slowest by 0.0014 and 0.0019 (standard errors
      0.0006 and 0.0002; the slowest still 0.0003 below the window) and lowered the other
      seven by 0.0015-0.0077 (``results/rankings_drift_near_s1-40.md``); the regression
      ranker's mean fell from 0.733 to 0.731. Both rankers count as many settings at or
      above the windows with it as without, at a lower mean: it is off by default, a setting
      for streams known to drift slowly.
    * *The longest candidate: 192 measurements* (``longest``, 2,010 rows; 256 before, the
      largest power of two up to half of those kept). At the slowest settings the weights
      put about 40% on the longest candidate late in a stream, whose lag the criterion
      prices lower than the score does (above: 2% worse by the criterion, 0.06 by the
      score). Replayed on streams 1-20 (``experiment_memory_rules.py --seeds 20``; each
      half in ``results/memory_rules.md`` and ``memory_rules_s11-20.md``), the longest
      candidate trades the slow settings against the fast ones smoothly: 128 gains at the
      13 faster settings (mean gap to the best window +0.019 against +0.016) and loses
      0.004-0.014 at the four slowest; 512 loses nearly everywhere (+0.010); 160, 192 and
      224 are at least the best window at all 17 (+0.016 each; 256: 16). On each half
      alone, 192 is at 17 and 16 (0.001 below the window at the clipped walk of 0.003 with
      five drifting weights of streams 11-20), 256 at 16 and 16. The middle one was chosen,
      and a rule for adopting it written down, before the benchmark ran it: on 20 streams
      per setting it is at least the best window at all 17 settings (mean 0.6654 against
      0.6649 for 256), +0.0033 (standard error 0.0015) at the slowest setting and within
      -0.0012..+0.0019 of 256 elsewhere (``results/rankings_drift_s1-20.md``, the
      ``profile`` column is 256 with the same seeds); on 40 streams at the nine settings
      with the smallest margins, streams 21-40 held out from the choice, at least the best
      window at all nine (256: eight), +0.0024 (0.0008) at the slowest, where it is 0.0007
      above the 1,000-row window, and -0.0013..+0.0008 elsewhere
      (``results/rankings_drift_longest_s1-40.md``); on 100 streams at the slowest setting
      (60 more, 41-100, held out; ``results/rankings_drift_slowest_s1-100.md``) 0.784
      against 0.781 for the 1,000-row window (+0.0038, standard error 0.0029), +0.0023
      (0.0006) over 256, which was +0.0015 (0.0030) there. The regression ranker's mean
      stayed at 0.732-0.733, with as many settings at or above the windows.
    * *Why paired weights* (``tests/benchmarks/experiment_memory_rules.py`` replays memory
      rules on recorded block measurements, ``results/memory_rules.md``). Every candidate's
      loss holds the noise of the measurement it predicts, so at the slowest settings the
      losses of the windows of 32, 64, 128 and 256 measurements were 1.14, 1.06, 1.02 and
      1.00 times the best, and weights relative to the best loss spread 14-25% on each,
      where the best fixed memory is 128 measurements (256 scores 0.02-0.06 lower, 32 about
      0.1). Paired standard errors tell them apart where the evidence allows: replayed, the
      gap to the best window went from -0.013..+0.030 to -0.002..+0.040 (16 of 17 settings
      at least level), and on ten other streams per setting (seeds 11-20,
      ``results/memory_rules_s11-20.md``) the rule scored 0.007 above the former default on
      average and at least level with it at all 17 settings (the four slowest +0.010 or
      more). Also tried, replayed on both sets of streams: ``z`` alone (as good, but slow
      after an abrupt switch, above); ``long_prior`` 0 (the slowest settings 0.005 below
      the best window) or 0.5 (level there, but 0.006 below the former default at a fastest
      clipped walk of the other streams); ``paired_eta`` 2 (0.015-0.016 lost at the fastest
      clipped walks) or 4 (0.007 below at the slowest); candidates every ``sqrt(2)``;
      ``rate`` 0.0005-0.002; the correlation factor on top (smallest gap -0.011); the
      standard deviation of the difference instead of its standard error, and the loss above
      the noise level ``L_1 / 2`` as the relative weights' scale (-0.03 at the fastest
      clipped walks, both); weights by the correlations' ratio ``(rho_k / rho_max)^3``
      (-0.08 at the slowest).
    * *How the memory was chosen before.* With blocks of 100 rows every 10, the best fixed
      memory per setting, chosen in hindsight, is 0.004 below to 0.047 above the best window;
      Lepski's rule is 0.08 below the best window on average: its noise estimate, the spread
      over one block's trees, misses the blocks' own sampling noise, which the error in
      predicting an independent measurement contains. Picking the single best candidate
      instead of mixing was 0.04-0.05 below the best window on average. Blocks of 200 rows
      every 25 averaged 0.05 less; 20 trees per block gained 0.001 on average at twice the
      cost, 5 trees lost 0.007 (up to 0.018 per setting); trees of depth 3, a fifth cheaper,
      lost 0.003 on average and up to 0.007 per setting; trees with a random third of the
      features, or scikit-learn's trees (a third of the features per split, full depth) as
      measurements, lost. Correlations with an unlagged measurement on disjoint rows
      (forests on the even and on the odd rows, 50% more tree-rows) beat the best window at
      the 13 faster settings by up to 0.046 but lose 0.09-0.10 at the four slowest. A mean
      of the block measurements over 1,000 rows beats a single 1,000-row forest by
      0.05-0.07 at the slowest settings: what those settings lack is a choice of memory, not
      a better measurement.
    * *Cost.* A 10-tree forest of depth 4 on 100 rows every 10 rows (100 tree-rows per row,
      against 80 for 200 every 25 under Lepski's rule; growing the forest is about 90% of
      the time; the paired weights add a windows x windows x features array of products,
      the pooling one mean over the features per ask). The worker's default pipeline in
      process (``tests/benchmarks/bench_ranker_cost.py``, ``results/ranker_cost.md``, one
      run): 6,700-7,400 rows/s on a 10-feature hyperplane and 8,900-9,900 on Electricity;
      6,400-7,300 and 8,900-12,100 unpooled; 8,400-9,200 and 11,600-13,300 under Lepski's
      rule; 20,500-21,700 and 25,400-28,600 with no ranker. The state holds 100 rows, up
      to 640 measurements and, per feature, a loss and three moments per window and a
      product per pair of windows (9 windows: 81).

    References
    ----------
    .. [1] O. V. Lepski, "Asymptotically minimax adaptive estimation I", Theory of
       Probability and its Applications 36(4), 1991.
    .. [2] A. Goldenshluger, A. Nemirovski, "On spatially adaptive estimation of
       nonparametric regression", Mathematical Methods of Statistics 6(2), 1997.
    .. [3] L. Breiman, "Random forests", Machine Learning 45(1), 2001.
    .. [4] V. Vovk, "Aggregating strategies", Proceedings of the 3rd Annual Workshop on
       Computational Learning Theory (COLT), 1990.
    .. [5] N. Cesa-Bianchi, G. Lugosi, "Prediction, Learning, and Games", Cambridge University
       Press, 2006.

    Examples
    --------
    Only feature 0 matters for the first 2,000 rows, only feature 2 after them:

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((4000, 4))
    >>> y = np.where(np.arange(4000) < 2000, X[:, 0] > 0.5, X[:, 2] > 0.5).astype(int)
    >>> ranker = BlockForestRanker(seed=1)
    >>> ranker.learn_many(X[:2000], y[:2000])
    >>> int(np.argmax(ranker.importances()["mdi"]))
    0
    >>> ranker.learn_many(X[2000:], y[2000:])
    >>> int(np.argmax(ranker.importances()["mdi"]))
    2
    """

    kind = "block_forest"

    def _init_labels(self) -> None:
        self._classes = ClassIndex()

    def _encode_y(self, X: np.ndarray, y) -> np.ndarray:
        """What the block keeps of each row's label: its class index."""
        return self._classes.encode(y, n_rows=X.shape[0])

    def _block_importances(self, X: np.ndarray,
                           codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """MDI of a forest grown on one block (every tree on its own bootstrap and subspace),
        and the variance of that mean over the trees (the ``trees`` noise)."""
        p, a = self.params, self._arrays
        n_classes = max(len(self._classes), int(codes.max()) + 1)
        T, d = p["n_trees"], X.shape[1]
        slots = _cart.n_node_slots(p["max_depth"])
        nodes = [np.zeros((T, slots), np.int64), np.zeros((T, slots)),
                 np.zeros((T, slots), np.int64), np.zeros((T, slots), np.int64),
                 np.zeros((T, slots, n_classes))]
        n_nodes = np.zeros(T, np.int64)
        class_rows, class_start = _cart.class_layout(codes, n_classes)
        _cart.grow_forest(X, codes, np.ones(X.shape[0]), class_rows, class_start, 0, 0.0,
                          p["mtry"], p["max_depth"], a["rng"], np.zeros((T, d), np.int64),
                          *nodes, n_nodes)
        feature, _, left, right, count = nodes
        # the forest's mean of T trees: its variance is at least the trees' variance / T
        per_tree = _cart.mdi_per_tree(feature, left, right, count, n_nodes, d)
        return (_cart.mdi(feature, left, right, count, n_nodes, np.ones(T), d),
                per_tree.var(axis=0) / T)

    def _extra_state(self) -> dict:
        return {"classes": list(self._classes.classes)}

    def _load_extra_state(self, extra: dict) -> None:
        self._classes = ClassIndex(extra.get("classes", ()))

    def _check_block_y(self, held: np.ndarray) -> None:
        """The labels held must be known classes."""
        check_index(held, 0, max(len(self._classes), 1), "block_y")
