"""Feature importances that follow drift at its own speed: block forests and a memory per feature.

Every ``stride`` rows, a small random forest (the CART trees of :mod:`models.cart._block_cart`)
learns the latest ``block_size`` rows; its impurity importances (MDI, Breiman 2001) are one
*measurement* of what matters now. A feature's importance is a mixture of the means of its
recent measurements over candidate windows, weighted by how much worse each window predicted
the feature's next independent measurement than the best one, in standard errors of their
paired difference, half of that evidence pooled over the stream's features (exponential
weights, Vovk 1990; Cesa-Bianchi & Lugosi 2006). Multi-target regression streams get the same
ranker with regression trees (:mod:`models.cart.block_forest_regression`). How this rule was
chosen, and the alternatives measured against it, are in ``docs/research/block_forest.md``.
"""

from __future__ import annotations

import inspect

import numpy as np

from ..core import _fmath as fm
from ..core._rng import seed_states
from ..core._trees import grow_axis
from ..core.base import (
    Classifier,
    ClassIndex,
    Learner,
    check_index,
    check_shapes,
    check_X,
    upgrade_state,
)
from . import _block_cart, _block_steps, _block_windows

_SALT = 0xB10C
_FIRST_ROWS = 16  # measurements held at first; the ring doubles up to max_blocks' worth

#: Version of the state :meth:`BlockRanker.to_state` writes. Version 1 (no ``state_version``
#: in the extra values) also held the alternatives kept for comparison (Lepski's rule, the
#: weights relative to the best loss, the correlations, the young stream's prior) with their
#: parameters and arrays; version 2 holds the window mixture alone.
STATE_VERSION = 2

#: Version-1 settings that version 2 dropped, with the value under which a version-1 state
#: computed exactly what version 2 computes (the value a state lacking the parameter meant,
#: first): a state with any other value is refused (:meth:`BlockRanker._upgrade_v1`).
_DROPPED_SETTINGS = {
    "memory": ("lepski", "mixture",
               "Lepski's rule (memory='lepski', or a state written before the window mixture)"),
    "weights": ("relative", "paired",
                "weights relative to the best loss (weights='relative', or a state written "
                "before the paired weights)"),
    "corr_eta": (0.0, 0.0, "the correlation criterion (corr_eta > 0)"),
    "young_prior": (0.0, 0.0, "the young stream's prior (young_prior > 0)"),
}
#: Version-1 parameters that only served a dropped rule: ignored whatever their value
_UNUSED_V1 = ("kappa", "noise", "young_blocks")
#: Version-1 arrays that only served a dropped rule: the trees' spread (Lepski's noise) and
#: the moments of the windows' predictions and targets (the correlations)
_UNUSED_V1_ARRAYS = ("spread", "pred_moments", "target_moments")


class BlockRanker(Learner):
    """The ring of rows, the block measurements and the window mixture shared by the
    block-forest rankers (not used directly; parameters as :class:`BlockForestRanker`).

    A subclass says what a row's label is (:meth:`_encode_y`, :meth:`_check_block_y`,
    ``state_arrays["block_y"]``) and grows a block's forest (:meth:`_block_importances`).
    """

    #: ``block_y`` holds class indices here; a subclass may hold other labels (targets)
    state_arrays = {"block_x": ("<f8", 2), "block_y": ("<i8", 1), "ring": ("<i8", 1),
                    "history": ("<f8", 2), "n_blocks": ("<i8", 1),
                    "losses": ("<f8", 2), "loss_cross": ("<f8", 3),
                    "rng": ("<u8", 1), "n_seen": ("<i8", 1)}

    def __init__(self, block_size: int = 100, stride: int = 10, n_trees: int = 10,
                 max_depth: int = 4, mtry: float = 1.0, max_blocks: int = 64, seed: int = 1,
                 rate: float = 0.001, paired_eta: float = 3.0, long_prior: float = 0.25,
                 eta: float = 0.5, pool: float = 0.5, longest: int = 192):
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
        if not 0.0 < float(rate) <= 1.0:
            raise ValueError("rate must be in (0, 1]")
        if not float(paired_eta) > 0.0:
            raise ValueError("paired_eta must be > 0")
        if not float(long_prior) >= 0.0:
            raise ValueError("long_prior must be >= 0 (0: no prior)")
        if not float(eta) > 0.0:
            raise ValueError("eta must be > 0")
        if not 0.0 <= float(pool) <= 1.0:
            raise ValueError("pool must be in [0, 1] (0: every feature on its own evidence)")
        if int(longest) < 0:
            raise ValueError("longest must be >= 0 (measurements; 0: the largest power of two "
                             "up to half of those kept)")
        self.params = {"block_size": int(block_size), "stride": int(stride),
                       "n_trees": int(n_trees),
                       "max_depth": int(max_depth), "mtry": float(mtry),
                       "max_blocks": int(max_blocks), "seed": int(seed), "rate": float(rate),
                       "paired_eta": float(paired_eta), "long_prior": float(long_prior),
                       "eta": float(eta), "pool": float(pool), "longest": int(longest)}
        self._arrays: dict[str, np.ndarray] = {}
        self._columns: tuple | None = None  # the block's sorted columns (:meth:`_sorted_columns`)
        self._columns_at = -1  # the measurement they were sorted for
        self._window_lengths: np.ndarray | None = None  # :meth:`_windows`, once
        self._window_logs: np.ndarray | None = None  # their long-prior term, once
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
        """Per feature: how many recent measurements its importance averages now (the
        windows' lengths weighted as the mixture weighs them)."""
        kept = min(self.n_blocks, self._arrays["history"].shape[0]) if self._arrays else 0
        counts = np.minimum(self._windows(), max(kept, 1)).astype(np.float64)
        # a sum over the windows in their order, not a matrix product: BLAS picks its
        # kernel (and so its rounding) by the CPU
        return (counts[:, None] * self._weights()).sum(axis=0) if kept \
            else np.zeros(self.n_features or 0)

    @property
    def nbytes(self) -> int:
        """Bytes held in memory: the state arrays, and the block's sorted columns with their
        merge buffers (not state: :meth:`_sorted_columns`)."""
        if self._columns is None:
            return self.memory_bytes()
        order, values, scratch = self._columns
        return self.memory_bytes() + sum(a.nbytes for a in (order, values, *scratch))

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
                        "n_blocks": np.zeros(1, np.int64),
                        "losses": np.zeros((len(self._windows()), n_features)),
                        "loss_cross": np.zeros((len(self._windows()),) * 2 + (n_features,)),
                        "rng": seed_states(self.params["seed"], 1, _SALT),
                        "n_seen": np.zeros(1, np.int64)}

    def _history_rows(self) -> int:
        """Measurements kept: ``max_blocks`` blocks' worth of strides."""
        p = self.params
        return max(1, p["max_blocks"] * p["block_size"] // p["stride"])

    def _sorted_columns(self) -> tuple[np.ndarray, np.ndarray]:
        """The block's rows in increasing order of each column (ties by slot) and their
        values in that order (:func:`models.cart._block_cart.sort_columns`).

        Not state: the order is what a sort of the block gives, so a restored learner sorts
        again and finds the same. Between two measurements of this learner only the rows
        written since the last one changed (``stride`` of ``block_size``): they are merged
        into the order kept from then, which costs a pass over each column instead of a sort.
        """
        a = self._arrays
        X, ring = a["block_x"], a["ring"]
        B, d = X.shape
        fresh = int(ring[2])
        if self._columns is None or self._columns_at != self.n_blocks or fresh >= B:
            order, values = np.empty((d, B), np.int64), np.empty((d, B))
            _block_cart.sort_columns(X, order, values)
            self._columns = (order, values, tuple(np.empty(B + 1, t) for t in
                                                  (np.int64, np.int64, float, np.int64, float)))
        else:
            _block_cart.update_ring_columns(X, int(ring[0]), fresh, *self._columns)
        self._columns_at = self.n_blocks + 1
        return self._columns[0], self._columns[1]

    def _measure(self) -> None:
        """Train a forest on the last block of rows, keep its importances (a ring)."""
        a = self._arrays
        n, K, cap = int(a["n_blocks"][0]), a["history"].shape[0], self._history_rows()
        if n >= K and K < cap:
            # the ring starts small and doubles until it holds max_blocks' worth: a young
            # stream keeps only what it measured; a ring that never wrapped keeps its order
            a["history"] = grow_axis(a["history"], min(2 * K, cap))
        slot = n % a["history"].shape[0]
        a["history"][slot] = self._block_importances(a["block_x"], a["block_y"])
        a["ring"][2] = 0
        a["n_blocks"][0] += 1
        self._score_windows()

    # ------------------------------------------------------------------ the mixture

    def _windows(self) -> np.ndarray:
        """Candidate memories, in measurements: 1, 2, 4, ... below ``longest``, then
        ``longest``, at most half the kept ones (so a window and the gap before the
        measurement it predicts fit in the ring); ``longest`` 0: 1, 2, 4, ... up to half the
        kept ones."""
        if self._window_lengths is None:  # asked at every measurement and every ask
            top = max(1, self._history_rows() // 2)
            powers = 2 ** np.arange(top.bit_length())  # 1, 2, 4, ... up to top (integers)
            longest = min(self.params["longest"], top)
            self._window_lengths = powers if longest <= 0 else \
                np.append(powers[powers < longest], longest)
        return self._window_lengths

    def _gap(self) -> int:
        """Measurements between two that share no rows: ``ceil(block_size / stride)``."""
        return -(-self.params["block_size"] // self.params["stride"])

    def _score_windows(self) -> None:
        """Fade every window's loss and add its squared error on the newest measurement,
        predicted by the window that ended ``gap`` measurements earlier (whose trees saw
        none of the newest block's rows, so the error is drift plus independent noise);
        fade the products of the windows' errors (:meth:`_paired_scores`) alike
        (:func:`models.cart._block_windows.score_windows`, on the ring in place)."""
        if min(self.n_blocks, self._arrays["history"].shape[0]) <= self._gap():
            return
        a = self._arrays
        _block_windows.score_windows(a["history"], self.n_blocks, self._gap(), self._windows(),
                                     self.params["rate"], a["losses"], a["loss_cross"],
                                     np.empty((2, *a["losses"].shape)))
    def _weights(self) -> np.ndarray:
        """Each window's weight per feature, normalized: ``exp(-P_k + long_prior log(w_k) /
        log(w_max))`` with the penalty ``P_k = max(z_k / paired_eta, (L_k - L_min) / (eta
        L_min))`` (:meth:`_paired_scores`), first shrunk toward its mean over the features,
        ``(1 - pool) P_k + pool mean_f P_k`` (the features whose measurements ever moved: a
        constant one has no evidence)."""
        p, L = self.params, self._arrays["losses"]
        out = np.empty_like(L)
        _block_windows.window_weights(L, self._paired_scores(), self._logs(), p["eta"],
                                      p["paired_eta"], p["pool"], p["long_prior"], out)
        return out

    def _logs(self) -> np.ndarray:
        """Each window's log length over the longest's (the long prior's term)."""
        if self._window_logs is None:  # fixed by the parameters, asked after every block
            windows = self._windows()
            # the core's log (models.core._fmath): numpy's differs with AVX-512
            top = fm.log(float(windows[-1])) if windows[-1] > 1 else 1.0
            self._window_logs = fm.log_array(windows) / top
        return self._window_logs

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
        # one pass per feature (:func:`models.cart._block_windows.paired_scores`): the weights are
        # asked after every block, and numpy's temporaries over windows x windows x features
        # were a third of an ask on 500 features
        out = np.empty_like(a["losses"])
        _block_windows.paired_scores(a["losses"], a["loss_cross"], mass, squares, out)
        return out

    def _mixture(self) -> np.ndarray:
        """Per feature: the windows' means weighted by :meth:`_weights`."""
        windows = self._windows()
        means = np.empty((len(windows), self.n_features))
        _block_windows.window_means(self._arrays["history"], self.n_blocks, 0, windows, means)
        out = np.empty(self.n_features)
        _block_windows.mixture(self._weights(), means, out)
        return out

    # ------------------------------------------------------------------ importances

    def _recent(self) -> np.ndarray:
        """The kept measurements, newest first: shape ``(kept, F)``."""
        a = self._arrays
        n, K = self.n_blocks, a["history"].shape[0]
        slots = (n - 1 - np.arange(min(n, K))) % K
        return a["history"][slots]

    def importances(self) -> dict:
        """``{"mdi": array}``: per feature, its block importances averaged over the window
        mixture (see the class doc). Empty before the first block completes."""
        if self.n_blocks == 0:
            return {}
        return {"mdi": self._mixture()}

    # ------------------------------------------------------------------ state

    def _extra_state(self) -> dict:
        return {"state_version": STATE_VERSION}

    @classmethod
    def from_state(cls, state: dict):
        """Rebuild from :meth:`to_state`.

        A state of version 1 (written before the alternatives kept for comparison were
        removed) continues exactly when it ran the window mixture with the paired weights,
        no correlations and no young stream's prior (the default, with any ``pool`` and
        ``longest``): its unused parameters and arrays are dropped (:meth:`_upgrade_v1`).
        One that ran a removed rule, and a state of a later version or naming a parameter
        this version does not have, is refused with a ``ValueError`` that says why.
        """
        state = upgrade_state(cls, state, STATE_VERSION)
        params = state.get("params")
        if isinstance(params, dict):
            unknown = sorted(set(params) - set(inspect.signature(cls.__init__).parameters))
            if unknown:
                raise ValueError(f"{cls.kind} state of version {STATE_VERSION} names parameters "
                                 f"this version does not have: {unknown}")
        return super().from_state(state)

    @classmethod
    def _upgrade_v1(cls, state: dict) -> dict:
        """A version-1 state as version 2, or ``ValueError`` when it ran a rule version 2
        no longer has (what it would publish next cannot be computed).

        Parameters a version-1 state lacks mean what they meant when it was written: no
        ``memory``, Lepski's rule; no ``weights``, the relative ones; no ``pool``, each
        feature on its own evidence (0); no ``longest``, powers of two (0).
        """
        params = dict(state.get("params") or {})
        for name, (absent, kept, what) in _DROPPED_SETTINGS.items():
            value = params.pop(name, absent)
            if value != kept:
                raise ValueError(
                    f"{cls.kind} state of version 1 ran {what}; version {STATE_VERSION} "
                    "keeps only the window mixture with the paired weights (see "
                    "docs/research/block_forest.md): start this ranker afresh")
        for name in _UNUSED_V1:
            params.pop(name, None)
        params.setdefault("pool", 0.0)  # written before the pooled evidence
        params.setdefault("longest", 0)  # written before the longest candidate was a setting
        arrays = {k: v for k, v in (state.get("arrays") or {}).items()
                  if k not in _UNUSED_V1_ARRAYS}
        extra = {**(state.get("extra") or {}), "state_version": STATE_VERSION}
        return {**state, "params": params, "arrays": arrays, "extra": extra}

    def _check_state(self) -> None:
        a, B = self._arrays, self.params["block_size"]
        F = a["block_x"].shape[1]
        K = a["history"].shape[0]
        check_shapes(a, {"block_x": (B, F), "block_y": (B, *a["block_y"].shape[1:]),
                         "ring": (3,), "history": (K, F), "n_blocks": (1,),
                         "losses": (len(self._windows()), F),
                         "loss_cross": (len(self._windows()),) * 2 + (F,),
                         "rng": (1,), "n_seen": (1,)})
        for name, what in (("losses", "window losses"),
                           ("loss_cross", "products of the windows' errors")):
            if not (np.isfinite(a[name]).all() and (a[name] >= 0.0).all()):
                raise ValueError(f"{self.kind} state: {what} must be finite and >= 0")
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

    def _block_importances(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """One block's forest importances (one measurement)."""
        raise NotImplementedError

    def _check_block_y(self, held: np.ndarray) -> None:
        """Raise ``ValueError`` when a held label is invalid."""
        raise NotImplementedError


class BlockForestRanker(BlockRanker, Classifier):
    """Ranks features by block-forest importances averaged over a memory chosen per feature.

    Every ``stride`` rows a forest of ``n_trees`` CART trees learns the latest
    ``block_size`` rows; its mean decrease in impurity (MDI, Breiman [1]_) is one
    measurement of each feature's importance. The candidate memories are the newest
    ``k = 1, 2, 4, ...`` measurements below ``longest``, then ``longest`` (at most half of
    those kept). Each candidate keeps, per feature, a faded mean ``L_k`` (rate ``rate``) of
    its squared error in predicting the newest measurement from the ``k`` measurements that
    ended ``g = ceil(block_size / stride)`` measurements before it: those share no rows with
    the newest block, so a memory that is too short pays for its noise, one too long for the
    drift it averages in. A feature's importance is the candidates' means under exponential
    weights (Vovk [2]_; Cesa-Bianchi & Lugosi [3]_): a candidate ``z_k`` standard errors of
    the paired difference ``L_k - L_b`` worse than the best one ``b`` weighs
    ``exp(-max(z_k / paired_eta, (L_k - L_b) / (eta L_b)) + long_prior log(k) / log(k_max))``,
    the penalty shrunk by ``pool`` toward its mean over the stream's features. Under a fast
    drift the short memories carry the weight; under a slow drift or none the long ones do,
    and average the forests' noise away.

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
    seed : int, default 1
        Master seed: the learner is deterministic given the seed and the stream.
    rate : float, default 0.001
        Fading rate of the candidates' losses and of the products of their errors (about
        the last 1,000 measurements, 10,000 rows by default, weigh in).
    paired_eta : float, default 3.0
        A candidate whose loss is ``paired_eta`` standard errors above the best one's
        weighs ``1/e`` of it (before the prior).
    long_prior : float, default 0.25
        The log-weight the longest candidate gets over the shortest one, growing with the
        log of the length (0: none): where the candidates cannot be told apart, the longer
        ones, which average more noise away, are preferred.
    eta : float, default 0.5
        The temperature relative to the best loss: a candidate whose loss is ``eta`` times
        the best one's above it weighs at most ``1/e`` of the best one. It reacts at once
        to an abrupt change, where the long candidates' ``z`` grows slowly.
    pool : float, default 0.5
        The share of each feature's penalty taken from the mean over the stream's features
        (those whose measurements ever moved: a feature no block splits on has no evidence):
        0, every feature on its own evidence; 1, one memory for the whole stream.
    longest : int, default 192
        The longest candidate memory, in measurements (2,010 rows by default). 0: powers of
        two up to half of those kept (256 by default).

    See Also
    --------
    models.cart.block_forest_regression.BlockForestRegressionRanker : the same ranker for
        multi-target regression streams.

    Notes
    -----
    The measurements behind this rule and its defaults (sliding-window forests, MOA's ARF
    importances, Lepski's rule, other weights and priors, block sizes, cost) are in
    ``docs/research/block_forest.md``. The state (:meth:`to_state`) is version
    :data:`STATE_VERSION`; :meth:`from_state` says which older states continue.

    References
    ----------
    .. [1] L. Breiman, "Random forests", Machine Learning 45(1), 2001.
    .. [2] V. Vovk, "Aggregating strategies", Proceedings of the 3rd Annual Workshop on
       Computational Learning Theory (COLT), 1990.
    .. [3] N. Cesa-Bianchi, G. Lugosi, "Prediction, Learning, and Games", Cambridge University
       Press, 2006.

    Examples
    --------
    Only feature 0 matters for the first 2,000 rows, only feature 2 after them; the block
    forests' MDI [1]_ follows the switch within a few hundred rows:

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

    def _block_importances(self, X: np.ndarray, codes: np.ndarray) -> np.ndarray:
        """MDI of a forest grown on one block (every tree on its own bootstrap and
        subspace)."""
        p, a = self.params, self._arrays
        T, d = p["n_trees"], X.shape[1]
        # the kernel also gives each tree's importances; the forest's are their mean
        forest, per_tree = np.empty(d), np.empty((T, d))
        # the kernel counts the classes up to the largest code held, if more
        _block_cart.forest_importances(X, self._sorted_columns(), codes, len(self._classes), T,
                                       p["mtry"], _block_cart.split_features(d),
                                       p["max_depth"], a["rng"], forest, per_tree)
        return forest

    #: :meth:`learn_many_ranked` gives the importances after every measurement of one call
    ranks_while_learning = True

    def learn_many_ranked(self, X, y) -> tuple[np.ndarray, dict]:
        """:meth:`learn_many`, and what :meth:`importances` answered after each measurement
        it made: ``rows[m]``, the rows of ``X`` taken when measurement ``m`` completed, and
        ``{"mdi": mdi}`` with ``mdi[m]`` the importances then. One kernel call
        (:func:`models.cart._block_steps.learn_rows`) instead of a call and an ask per
        block: the state and the importances are those of :meth:`learn_many` and an ask
        after every block, bit for bit.

        Examples
        --------
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> X = rng.random((400, 3))
        >>> y = (X[:, 1] > 0.5).astype(int).tolist()
        >>> rows, imps = BlockForestRanker(seed=1).learn_many_ranked(X, y)
        >>> rows[:3].tolist(), imps["mdi"].shape, int(np.argmax(imps["mdi"][-1]))
        ([100, 110, 120], (31, 3), 1)
        """
        X = check_X(X, self.n_features)
        if y is None:
            raise ValueError(f"{type(self).__name__} needs labels: y must not be None")
        codes = self._encode_y(X, y)
        if X.shape[0] and not self._arrays:
            self._allocate(X.shape[1], codes)
        if X.shape[0] == 0:
            return np.zeros(0, np.int64), {"mdi": np.zeros((0, X.shape[1]))}
        a, p = self._arrays, self.params
        B, d = a["block_x"].shape
        if self._columns is None:  # the sorted columns' arrays (:meth:`_sorted_columns`)
            self._columns = (np.empty((d, B), np.int64), np.empty((d, B)), tuple(
                np.empty(B + 1, t) for t in (np.int64, np.int64, float, np.int64, float)))
        order, values, scratch = self._columns
        sorted_ok = np.array([self._columns_at == self.n_blocks], np.uint8)
        cap = X.shape[0] // p["stride"] + 2  # measurements this call can make
        rows, mdi = np.zeros(cap, np.int64), np.zeros((cap, d))
        n_trace, status, start, first = np.zeros(1, np.int64), np.zeros(1, np.int64), 0, False
        while True:
            start = _block_steps.learn_rows(
                X, codes, len(self._classes), start, first, a["block_x"], a["block_y"],
                a["ring"], a["history"], a["n_blocks"], a["losses"], a["loss_cross"], a["rng"],
                order, values, scratch, sorted_ok, p["stride"], self._history_rows(),
                p["n_trees"], p["mtry"], _block_cart.split_features(d), p["max_depth"],
                self._windows(), self._gap(), p["rate"], self._logs(), p["eta"],
                p["paired_eta"], p["pool"], p["long_prior"], rows, mdi, n_trace, status)
            if status[0] == _block_steps.DONE:
                break
            # the ring of measurements doubles as at a measurement of learn_many (_measure)
            a["history"] = grow_axis(a["history"], min(2 * a["history"].shape[0],
                                                       self._history_rows()))
            first = True
        if n_trace[0]:
            self._columns_at = self.n_blocks
        a["n_seen"][0] += X.shape[0]
        return rows[:n_trace[0]], {"mdi": mdi[:n_trace[0]]}

    def _extra_state(self) -> dict:
        return {**super()._extra_state(), "classes": list(self._classes.classes)}

    def _load_extra_state(self, extra: dict) -> None:
        self._classes = ClassIndex(extra.get("classes", ()))

    def _check_block_y(self, held: np.ndarray) -> None:
        """The labels held must be known classes."""
        check_index(held, 0, max(len(self._classes), 1), "block_y")
