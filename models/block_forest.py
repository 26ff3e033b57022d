"""Feature importances that follow drift at its own speed: block forests and a memory per feature.

Every ``stride`` rows, a small random forest (the CART trees of :mod:`models._cart`) learns
the latest ``block_size`` rows; its impurity importances (MDI, Breiman 2001) are one
*measurement* of what matters now. A feature's importance is a mean of its recent
measurements over a memory chosen per feature, so each feature gets the memory its own drift
allows. By default the memory is a mixture of windows weighted by how well each window
predicted the feature's next independent measurement (exponential weights, Vovk 1990;
Cesa-Bianchi & Lugosi 2006); Lepski's rule (in the intersection-of-confidence-intervals form
of Goldenshluger & Nemirovski 1997) is the other choice. Multi-target regression streams get
the same ranker with regression trees (:mod:`models.block_forest_regression`).
"""

from __future__ import annotations

import numpy as np

from . import _cart
from ._rng import seed_states
from ._trees import grow_axis
from .base import Classifier, ClassIndex, Learner, check_index, check_shapes, check_X

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
                    "losses": ("<f8", 2), "pred_moments": ("<f8", 3),
                    "target_moments": ("<f8", 2), "rng": ("<u8", 1), "n_seen": ("<i8", 1)}

    def __init__(self, block_size: int = 100, stride: int = 10, n_trees: int = 10,
                 max_depth: int = 4, mtry: float = 1.0, max_blocks: int = 64,
                 kappa: float = 1.5, noise: str = "trees", seed: int = 1,
                 memory: str = "mixture", rate: float = 0.001, eta: float = 0.25,
                 corr_eta: float = 0.3):
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
        if not float(eta) > 0.0:
            raise ValueError("eta must be > 0")
        if not float(corr_eta) >= 0.0:
            raise ValueError("corr_eta must be >= 0 (0: no correlation criterion)")
        self.params = {"block_size": int(block_size), "stride": int(stride),
                       "n_trees": int(n_trees),
                       "max_depth": int(max_depth), "mtry": float(mtry),
                       "max_blocks": int(max_blocks), "kappa": float(kappa), "noise": noise,
                       "seed": int(seed), "memory": memory, "rate": float(rate),
                       "eta": float(eta), "corr_eta": float(corr_eta)}
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
        counts = np.minimum(self._windows(), max(R.shape[0], 1))
        return counts @ self._weights() if R.shape[0] else np.zeros(self.n_features or 0)

    def memory_bytes(self) -> int:
        """Bytes held by the state arrays."""
        return int(sum(a.nbytes for a in self._arrays.values()))

    # ------------------------------------------------------------------ learning

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
        """Candidate memories, in measurements: 1, 2, 4, ... up to half the kept ones (so a
        window and the gap before the measurement it predicts fit in the ring)."""
        top = max(1, self._history_rows() // 2)
        return 2 ** np.arange(int(np.log2(top)) + 1)

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
        fade the moments of those predictions and targets alike (:meth:`_correlations`)."""
        R, g = self._recent(), self._gap()
        if R.shape[0] <= g:
            return
        a, rate = self._arrays, self.params["rate"]
        pred, target = self._window_means(R[g:], self._windows()), R[0]
        for name, new in (("losses", (pred - target) ** 2),
                          ("pred_moments", np.stack([pred, pred * pred, pred * target])),
                          ("target_moments", np.stack([np.ones_like(target), target,
                                                       target * target]))):
            a[name] *= 1.0 - rate
            a[name] += rate * new

    def _weights(self) -> np.ndarray:
        """Each window's weight per feature: ``exp(-(L - L_min) / (eta L_min) + (rho -
        rho_max) / corr_eta)``, normalized (a loss ``eta`` above the best, relative to it,
        weighs ``1/e`` of the best's; so does a correlation ``corr_eta`` below the best)."""
        L = self._arrays["losses"]
        best = L.min(axis=0)
        logw = -(L - best) / (self.params["eta"] * best + 1e-12)
        if self.params["corr_eta"] > 0.0:
            rho = self._correlations()
            logw = logw + (rho - rho.max(axis=0)) / self.params["corr_eta"]
        w = np.exp(logw - logw.max(axis=0))
        return w / w.sum(axis=0)

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
        return np.sqrt(0.5 * np.mean((H[lag:] - H[:-lag]) ** 2, axis=0))

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
        written before the correlations has no ``corr_eta`` and no moments: it continues
        with the squared errors alone (``corr_eta`` 0) and its own ``rate`` and ``eta``."""
        params, arrays = state.get("params") or {}, state.get("arrays") or {}
        if "memory" not in params:
            params = {**params, "memory": "lepski", "rate": 0.005, "eta": 0.3}
        if "corr_eta" not in params:
            # written before the correlation criterion: it continues without it
            params = {**params, "corr_eta": 0.0}
        if arrays and "history" in arrays:
            K = len(cls(**params)._windows())
            F = np.asarray(arrays["history"]).shape[1]
            empty = {"losses": (K, F), "pred_moments": (3, K, F), "target_moments": (3, F)}
            arrays = {**{k: np.zeros(v) for k, v in empty.items() if k not in arrays},
                      **arrays}
        return super().from_state({**state, "params": params, "arrays": arrays})

    def _check_state(self) -> None:
        a, B = self._arrays, self.params["block_size"]
        F = a["block_x"].shape[1]
        K = a["history"].shape[0]
        check_shapes(a, {"block_x": (B, F), "block_y": (B, *a["block_y"].shape[1:]),
                         "ring": (3,), "history": (K, F),
                         "spread": (K, F), "n_blocks": (1,),
                         "losses": (len(self._windows()), F),
                         "pred_moments": (3, len(self._windows()), F),
                         "target_moments": (3, F), "rng": (1,), "n_seen": (1,)})
        if not (np.isfinite(a["losses"]).all() and (a["losses"] >= 0.0).all()):
            raise ValueError(f"{self.kind} state: window losses must be finite and >= 0")
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
    ``k = 1, 2, 4, ...`` measurements, up to half of those kept. Each candidate keeps, per
    feature, a faded mean ``L_k`` (rate ``rate``) of its squared error in predicting the
    newest measurement from the ``k`` measurements that ended ``g = ceil(block_size /
    stride)`` measurements before it: those share no rows with the newest block, so the
    error is the drift over the gap plus independent noise, and a memory that is too short
    pays for its noise, one too long for the drift it averages in. Each candidate also
    keeps the faded correlation ``rho_k`` between those predictions and the measurements
    they predicted: the published ranking is judged by how it co-moves with the truth, not
    by its scale, and where drift is fast and the measurements noisy, the squared error
    prefers a long, flat memory that the correlation does not. A feature's importance is the
    candidates' means weighted by ``exp(-(L_k - L_min) / (eta L_min) + (rho_k - rho_max) /
    corr_eta)`` (exponential weights: Vovk 1990; Cesa-Bianchi & Lugosi 2006, ch. 2),
    normalised. Under a fast drift the short memories predict best and carry the weight;
    under a slow drift or none the long ones do, and average the block forests' noise away.

    *Lepski's rule* (``memory="lepski"``, the former default, kept for comparison and for
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
        stride``; 640 by default, so the longest candidate memory is 256 measurements,
        2,650 rows).
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
        The mixture's fading rate of the candidates' losses and correlations (about the last
        1,000 measurements, 10,000 rows by default, weigh in).
    eta : float, default 0.25
        The mixture's temperature, relative to the best loss: a candidate whose loss is
        ``eta`` times the best one's above it weighs ``1/e`` of the best one.
    corr_eta : float, default 0.3
        The mixture's temperature for the correlations: a candidate whose correlation is
        ``corr_eta`` below the best one's weighs ``1/e`` as much (on top of its loss's
        factor); 0 leaves the correlations out (the rule before they were added, with
        ``rate`` 0.005 and ``eta`` 0.3; a checkpoint written then continues that way).

    Notes
    -----
    Measured on the rotating hyperplanes of ``tests/benchmarks/bench_rankings_drift.py``
    (17 settings, drift speeds 1e-4 to 1e-2 per row, clipped and unclipped walks, abrupt
    switches; Cassidy & Deviney's correlation with the true weights; the final table is in
    ``tests/benchmarks/results/rankings_drift.md``):

    * *The default, 10 streams per setting:* at least the best of six sliding-window random
      forests (100, 300 and 1,000 rows; impurity and permutation importance, refitted at
      every ask) at 13 of the 17 settings, by up to 0.024, and below it at the four slowest
      (where a 1,000-row window is best) by 0.002-0.010; above MOA's ARF importances
      everywhere; mean 0.657. Weighed by squared errors alone (``corr_eta`` 0, ``rate``
      0.005, ``eta`` 0.3; the default before), the mixture was below the best window at 7
      settings, by up to 0.022 (mean 0.653); Lepski's rule on blocks of 200 rows every 25,
      the default before that, at all 17 (by up to 0.13).
    * *How it was chosen.* The measurements of each stream were recorded once and the memory
      rules replayed on them (streams 1-3 of every setting, then all ten). With blocks of
      100 rows every 10, the best fixed memory per setting, chosen in hindsight, is 0.009
      below to 0.047 above the best window (all ten streams); Lepski's rule is 0.08 below
      the best window on average (streams 1-3): its noise estimate, the spread over one
      block's trees, misses the blocks' own sampling noise, which the error in predicting
      an independent measurement contains. Picking the single best candidate instead of
      mixing was 0.04-0.05 below the best window on average where the mixture was 0.01
      above; by squared errors alone, a sharper mixture (``eta`` 0.02 to 0.1) kept long
      memories under fast drift and ``rate`` 0.003-0.03 changed little;
      candidates up to 512 measurements, a prior favouring long memories, or a target
      averaging the newest 5-10 measurements each moved the balance between the slowest
      and the fastest settings without lifting both. Blocks of 200 rows every 25 under the
      mixture averaged 0.05 less; 20 trees per block gained 0.001 on average at twice the
      cost, 5 trees lost 0.007 (up to 0.018 per setting); trees of depth 3, a fifth cheaper,
      lost 0.003 on average and up to 0.007 per setting; trees with a random third
      of the features at each tree, or scikit-learn's trees (a third of the features per
      split, full depth) as measurements, lost.
    * *Why the correlations* (``tests/benchmarks/experiment_memory_rules.py``,
      ``results/memory_rules.md``, the same replays on all ten streams). The score is a
      correlation, blind to scale; where drift is fast and the measurements noisy, a long
      memory flattens the importance, which costs little squared error (the signal's
      variance is small beside the noise's) but much correlation. Multiplying the
      correlation factor in (``corr_eta`` 0.3), with a slower fading (``rate`` 0.001: the
      slowest settings need the long memories' small loss differences estimated over more
      measurements) and ``eta`` 0.25, lifted the replayed gap to the best window from
      -0.022..+0.036 to -0.013..+0.030, at no extra trees. On ten other streams per
      setting (seeds 11-20, replayed, ``results/memory_rules_s11-20.md``; no window columns
      there) it scored 0.002 above the former rule on average: +0.005..+0.010 at the four
      slowest settings and +0.005..+0.011 at the fastest clipped ones; 0.002-0.015 below at
      the four 1e-3 settings, where the default has its largest margins, and 0.003 below at
      the abrupt switches. Correlations with an unlagged measurement on disjoint rows
      (forests on the even and on the odd rows, 50% more tree-rows) beat the best window at
      the 13 faster settings by up to 0.046 but lose 0.09-0.10 at the four slowest, where
      they are too weak to tell the long memories apart. A mean of the block
      measurements over 1,000 rows beats a single 1,000-row forest by 0.05-0.07 at the
      slowest settings and the 1,000-row window by 0.001-0.017: what those settings lack is
      a choice of memory, not a better measurement. The settings were chosen on the
      benchmark's own streams, hence the check on others.
    * *Cost.* A 10-tree forest of depth 4 on 100 rows every 10 rows (100 tree-rows per row,
      against 80 for 200 every 25 under Lepski's rule; growing the forest is 90% of the
      time; the correlations add a few arrays of windows by features). The worker's default
      pipeline in process (``tests/benchmarks/bench_ranker_cost.py``,
      ``results/ranker_cost.md``, one run): 6,300-7,800 rows/s on a 10-feature hyperplane
      and 10,200-11,900 on Electricity; 5,900-8,100 and 10,900-13,200 weighed by squared
      errors alone; 8,300-10,700 and 13,200-15,300 under Lepski's rule; 25,600-29,700 and
      26,400-33,900 with no ranker. The state holds 100 rows, up to 640 measurements and,
      per window and feature, a loss and three moments.

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
