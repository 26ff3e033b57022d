"""Experiment: which memory rule over the block measurements follows drift at every speed?

Run: ``python tests/benchmarks/experiments/experiment_memory_rules.py [--seeds 10] [--jobs 2]
[--cache DIR]`` (recording the 170 streams takes about 10 minutes of two cores the first
time; the replays then take about a minute each run).

The default ranking (:class:`models.cart.block_forest.BlockForestRanker`, ``memory="mixture"``)
averages each feature's block measurements over a mixture of windows. Weighed by the
windows' squared errors alone (the default two releases ago), it trailed the best
sliding-window forest on the streams of ``bench_rankings_drift.py`` at the four slowest
settings (a 1,000-row window wins there) and, by less, at the fastest clipped walks. This
script asks which rule over the same kind of measurements closes both ends (the correlation
factor of the former default, and the paired weights and their pooling over the features of
the current one, came out of it):

1. *Record.* For every stream, the measurements a ranker would take, kept on disk
   (``--cache``): ``s100``, the default block forest's (10 trees of depth 4 on the last
   100 rows, every 10 rows); ``b1000``, the same forest on the last 1,000 rows every 100;
   ``h5`` and ``h10``, two forests of 5 or 10 trees on the even and on the odd rows of each
   100-row block. The halves share no rows, so one half's measurement is an independent,
   unlagged target for the other's windows.
2. *Replay.* Each rule turns the measurements into an importance series at the benchmark's
   asks, scored with the benchmark's score (Cassidy & Deviney's mean correlation with the
   true weights), and compared with the committed sliding-window columns
   (``tests/benchmarks/rankings/results/rankings_drift_windows*.json``) on the same streams.

The rules:

* ``paired``: the current default, on windows of 1, 2, 4, ..., 128 and 192 measurements
  (``longest`` 192; the rules below use the powers of two up to 256, the windows before,
  unless said). ``z_k``, how many standard errors window ``k``'s faded
  loss lies above the best window's, from the faded products of the windows' squared errors
  and the faded mean's effective number of measurements; the penalty ``max(z_k /
  paired_eta, (L_k - L_b) / (eta L_b))``, half of it pooled (``pool`` 0.5: each feature's
  penalty shrunk halfway toward the mean over the stream's features), weights
  ``exp(-penalty + long_prior log(k) / log(k_max))``, and variants (a prior stronger
  toward the long candidates on a young stream, ``young_prior`` fading by ``e`` every
  ``young_blocks`` measurements: the memory grows with a young stream, as a window that
  has not filled does; no pooling, the default before; other pools; ``z`` alone; other
  temperatures, priors, windows and rates; the longest window 128, 160, 192 (the default),
  224, 256 (the windows before) or 512; the standard deviation of the difference
  instead of its standard error);
* ``mixture``: exponential weights on each window's faded squared error relative to the
  best one (``rate`` 0.005 unless said) in predicting a measurement ``g`` = 10 measurements
  ahead, with ``eta`` 0.3 (the default two releases ago) and variants; ``scale above the
  noise`` divides by the best loss minus half the one-measurement window's (an estimate of
  the target's noise) instead of the best loss;
* three other shapes of the same evidence: ``one window of the mixture's mean log-length``
  (the paired weights choose a single window, ``2^(sum_k w_k log2 k)`` measurements, instead
  of mixing the windows' means); ``faded means as candidates`` (exponentially faded means of
  the measurements, rate ``2 / (k + 1)``, the same lag and noise as a window of ``k``, in
  place of the windows: the steady-state filter of a random walk in noise); ``two fading
  rates`` (a candidate's penalty is the smaller of the paired penalty on losses faded at
  0.001 and, plus a handicap of 1, on losses faded at 0.01: recent evidence may bring a
  short window back);
* ``fixed:W``: a plain mean of the newest ``W`` measurements; ``oracle`` is the best fixed
  ``W`` per setting, chosen in hindsight (no rule can count on it);
* ``x gap-corr``: the mixture's weights times ``exp((rho_k - rho_max) / eta2)``, with
  ``rho_k`` the faded correlation (rate 0.001) between window ``k``'s mean and the
  measurement ``g`` ahead: a criterion with the score's form (correlation, blind to scale).
  With the errors faded at 0.001 too and ``eta`` 0.25, it is the former default;
  ``gap-corr ratio alone`` weighs by ``(rho_k / rho_max)^3`` instead of the losses;
* ``x split-corr``: the same with ``rho_k`` the correlation between window ``k``'s mean of
  one half's measurements and the other half's newest measurement (or the mean of its
  newest ``target``), averaged over both halves: no gap and no shared rows, so drift and
  noise are both seen unlagged. ``split-corr alone`` drops the squared-error weights
  (``Fisher z``: the weights act on ``atanh(rho)``, whose noise does not depend on
  ``rho``; ``rho^7``: weights proportional to a power of the correlation, a temperature
  relative to the best one). The half forests cost 50% (5 trees each) or 100% (10 each)
  more tree-rows than the default's forest, whose measurements are still the ones averaged.

The faded correlations divide the faded moments by the weight gathered so far; without
that, a young stream's moments shrink toward zero and the correlations of every window
inflate.

It is a measurement, not a learner. The window columns are those of the committed runs
(seeds 1-20 of every setting; ``--seeds 20`` replays them all).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path

import numpy as np
from scipy.signal import lfilter

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from models.cart import _block_cart
from models.cart.block_forest import BlockForestRanker
from tests.benchmarks.common import (
    tracking_score,
    write_results,
)
from tests.benchmarks.rankings import bench_rankings_drift as bench

RESULTS = Path(__file__).resolve().parent / "results"
RANKINGS = Path(__file__).resolve().parents[1] / "rankings" / "results"  # the window runs
OUT = RESULTS / "memory_rules.md"
WINDOW_RUNS = ("rankings_drift_windows.json", "rankings_drift_windows_s3-4.json",
               "rankings_drift_windows_s5-10.json", "rankings_drift_windows_s11-20.json")
CANDIDATES = 2 ** np.arange(9)  # powers of two, 1 ... 256 measurements: the windows before
LONGEST = np.array([1, 2, 4, 8, 16, 32, 64, 128, 192])  # the default's (``longest`` 192)
GAP = 10  # measurements between two 100-row blocks that share no rows (stride 10)
SLOWEST = ("T=0.0001",)
FASTEST_CLIPPED = ("T=0.01,clipped",)
CRITERION_SETTINGS = ("K=2,T=0.0001,unclipped", "K=2,T=0.01,clipped")


# ------------------------------------------------------------------------------ recording

def _forest(block: int, stride: int, trees: int, seed: int, X, y) -> BlockForestRanker:
    """A block forest that has seen both classes (so its block trees have two classes)."""
    forest = BlockForestRanker(block_size=block, stride=stride, n_trees=trees, seed=seed)
    forest.learn_many(X[:2], [0, 1])
    return forest


def block_importances(forest: BlockForestRanker, X: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """One measurement of ``forest`` on the rows ``X`` (``codes``: their classes), drawn from
    its generator: the kernel of its ``_block_importances``, which sorts the block the forest
    holds rather than rows given to it."""
    p, (B, d) = forest.params, X.shape
    order, values = np.empty((d, B), np.int64), np.empty((d, B))
    _block_cart.sort_columns(X, order, values)
    out, per_tree = np.empty(d), np.empty((p["n_trees"], d))
    _block_cart.forest_importances(X, (order, values), codes, len(forest._classes),
                                   p["n_trees"], p["mtry"], _block_cart.split_features(d),
                                   p["max_depth"], forest._arrays["rng"], out, per_tree)
    return out


def record(setting, seed: int, cache: Path) -> bool:
    """Measurements of one stream (see the module docstring), cached as ``.npz``; whether
    they had to be recorded (``False``: found in the cache)."""
    out = cache / f"{setting.name}_{seed}.npz"
    if out.exists():
        return False
    X, y, W = setting.stream(seed)
    codes = y.astype(np.int64)
    times = bench.ask_times(len(y))
    data = {"times": times, "truth": W[times - 1]}
    for key, (block, stride) in {"s100": (100, 10), "b1000": (1000, 100)}.items():
        forest = _forest(block, stride, 10, seed, X, y)
        ends = np.arange(block, len(y) + 1, stride)
        data[f"{key}_M"] = np.array([block_importances(forest, X[t - block:t],
                                                       codes[t - block:t]) for t in ends])
        data[f"{key}_t"] = ends
    for trees in (5, 10):
        forest = _forest(100, 10, trees, seed + 77, X, y)
        ends = np.arange(100, len(y) + 1, 10)
        for half, parity in (("A", 0), ("B", 1)):
            rows = [np.arange(t - 100 + (t - 100 + parity) % 2, t, 2) for t in ends]
            data[f"h{trees}{half}_M"] = np.array([block_importances(forest, X[r], codes[r])
                                                  for r in rows])
        data[f"h{trees}_t"] = ends
    np.savez(out, **data)
    return True


def _record_job(args):
    setting, seed, cache = args
    return record(setting, seed, cache)


# -------------------------------------------------------------------------------- replay

def prefix(M: np.ndarray) -> np.ndarray:
    """Prefix sums with a zero row first: ``C[j + 1] - C[a]`` is ``M[a:j + 1].sum(0)``."""
    return np.vstack([np.zeros((1, M.shape[1])), np.cumsum(M, axis=0)])


def window_means(C: np.ndarray, j: np.ndarray, windows: np.ndarray) -> np.ndarray:
    """Means of the ``w`` measurements ending at each ``j`` (fewer at the start):
    shape ``(len(j), len(windows), F)``."""
    a = np.maximum(j[:, None] - windows[None, :] + 1, 0)
    return (C[j + 1][:, None, :] - C[a]) / (j[:, None] - a + 1)[..., None]


def faded(x: np.ndarray, rate: float) -> np.ndarray:
    """``f_j = (1 - rate) f_{j-1} + rate x_j`` along the first axis."""
    return lfilter([rate], [1.0, -(1.0 - rate)], x, axis=0)


def faded_corr(P: np.ndarray, T: np.ndarray, rate: float) -> np.ndarray:
    """Faded Pearson correlation of every window's series ``P`` (n, K, F) with ``T`` (n, F)."""
    T = np.broadcast_to(T[:, None, :], P.shape)
    # faded means, divided by the weight they have gathered so far (a young stream's
    # moments would otherwise be shrunk toward zero and its correlations inflated)
    mass = faded(np.ones(P.shape[0]), rate)[:, None, None]

    def mean(x):
        return faded(x, rate) / mass

    mp_, mt = mean(P), mean(T)
    cov = mean(P * T) - mp_ * mt
    var = (mean(P * P) - mp_ ** 2) * (mean(T * T) - mt ** 2)
    return np.nan_to_num(cov / np.sqrt(np.maximum(var, 1e-30)))


def mse_log_weights(M, windows, eta: float, rate: float = 0.005,
                    horizon: int = 1) -> np.ndarray:
    """The default mixture's log-weights after each measurement: ``-(L_k - L_min) /
    (eta L_min)`` with ``L_k`` the faded squared error of window ``k`` ``GAP`` ahead."""
    L = faded(window_errors(M, windows, horizon)[0], rate)
    best = L.min(axis=1, keepdims=True)
    return -(L - best) / (eta * best + 1e-12)


def window_errors(M, windows, horizon: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Every window's squared error on the measurement ``GAP`` ahead (``horizon`` h > 1: on
    the mean of the next h measurements from there), ``(n, K, F)``, and which measurements
    have one (the first ``GAP + h - 1`` have none)."""
    n, first = M.shape[0], GAP + horizon - 1
    C = prefix(M)
    err = np.zeros((n, len(windows), M.shape[1]))
    j = np.arange(first, n)
    target = (C[j + 1] - C[j + 1 - horizon]) / horizon
    err[first:] = (window_means(C, j - horizon + 1 - GAP, windows) - target[:, None, :]) ** 2
    return err, np.arange(n) >= first


def paired_z(M, windows, rate: float = 0.001, n_eff: bool = True,
             horizon: int = 1) -> np.ndarray:
    """The default's paired scores after each measurement (:func:`errors_z` of the windows'
    errors)."""
    return errors_z(*window_errors(M, windows, horizon), rate, n_eff)


def errors_z(err, scored, rate: float = 0.001, n_eff: bool = True) -> np.ndarray:
    """Paired scores of candidates' squared errors ``err`` ``(n, K, F)`` (``scored``: which
    measurements have one): ``z_k = (L_k - L_b) / se`` with ``se^2 = Var(e_k^2 - e_b^2) /
    n_eff`` from the faded products of the errors (``n_eff`` False: the standard deviation of
    the difference, not its error)."""
    mass = faded(scored.astype(float), rate)
    squares = faded(scored.astype(float), 1 - (1 - rate) ** 2) * rate / (2 - rate)
    safe = np.maximum(mass, 1e-150)  # squared below: no underflow to 0
    m1 = faded(err, rate) / safe[:, None, None]
    m2 = faded(err[:, :, None, :] * err[:, None, :, :], rate) / safe[:, None, None, None]
    n, K, F = err.shape
    b = m1.argmin(axis=1)
    rows, cols = np.arange(n)[:, None], np.arange(F)[None, :]
    own = np.einsum("nkkf->nkf", m2)
    cross = np.take_along_axis(m2, b[:, None, None, :].repeat(K, 1), 2)[:, :, 0, :]
    diff = m1 - m1[rows, b, cols][:, None, :]
    var = np.maximum(own - 2 * cross + own[rows, b, cols][:, None, :] - diff ** 2, 0.0)
    if n_eff:
        var = var * (squares / safe ** 2)[:, None, None]
    return np.where(diff > 0, diff / np.maximum(np.sqrt(var), 1e-300), 0.0)


def paired(paired_eta=3.0, eta=0.5, long_prior=0.25, windows=CANDIDATES, rate=0.001,
           gap_eta=None, n_eff=True, pool=0.5, horizon=1, young_prior=0.0, young_blocks=None,
           row_prior=0.0, z_square=None):
    """A rule: the default's paired weights, ``exp(-max(z_k / paired_eta, (L_k - L_b) /
    (eta L_b)) + long_prior log(k) / log(k_max))`` (``eta`` None: ``z`` alone), each
    feature's penalty shrunk toward the features' mean by ``pool``, optionally times the gap
    correlations, and a young stream's prior: ``young_prior`` more toward the long
    candidates, fading by ``e`` every ``young_blocks`` measurements (``None``: with the
    scored measurements, as the losses do). Variants: errors on the mean of the next
    ``horizon`` measurements; ``row_prior`` times the log of each candidate's share of
    the log of the rows the candidates cover (the shortest ones overlap); the evidence
    penalty plus ``(z / z_square)^2 / 2``."""
    def rule(d):
        M = d["s100_M"]
        z = paired_z(M, windows, rate, n_eff, horizon)
        logw = -z / paired_eta - ((z / z_square) ** 2 / 2 if z_square else 0.0)
        if eta:
            logw = np.minimum(logw, mse_log_weights(M, windows, eta, rate, horizon))
        n = np.arange(M.shape[0])  # measurements before the newest
        scored = np.maximum(n - GAP + 1, 0)  # errors scored so far
        fade = np.exp(-n / young_blocks) if young_blocks else (1.0 - rate) ** scored
        logw = pooled_prior(logw, windows, pool, long_prior + young_prior * fade)
        if row_prior:
            logr = np.log(100 + (windows - 1) * 10.0)  # rows: blocks of 100 every 10
            edges = np.concatenate([[1.5 * logr[0] - 0.5 * logr[1]], (logr[1:] + logr[:-1]) / 2,
                                    [1.5 * logr[-1] - 0.5 * logr[-2]]])
            span = np.diff(edges)
            logw = logw + row_prior * np.log(span / span.max())[None, :, None]
        if gap_eta:
            logw = logw + corr_log_weights(gap_corr(M, windows, rate), gap_eta, None)
        return series(d, logw, windows)
    return rule


def candidate_penalties(M, predictions, rate=0.001, paired_eta=3.0, eta=0.5) -> np.ndarray:
    """The paired penalty's log-weights, ``-max(z_k / paired_eta, (L_k - L_b) / (eta L_b))``,
    for any candidates' ``predictions`` ``(n, K, F)`` (each candidate's estimate after every
    measurement) scored on the measurement ``GAP`` ahead."""
    n, K, F = predictions.shape
    err = np.zeros((n, K, F))
    err[GAP:] = (predictions[:-GAP] - M[GAP:, None, :]) ** 2
    z = errors_z(err, np.arange(n) >= GAP, rate)
    L = faded(err, rate)
    best = L.min(axis=1, keepdims=True)
    return np.minimum(-z / paired_eta, -(L - best) / (eta * best + 1e-12))


def faded_means(M, windows) -> np.ndarray:
    """Exponentially faded means of the measurements, rate ``2 / (k + 1)`` per window ``k``,
    divided by the weight gathered so far (a young stream's mean is not shrunk toward 0):
    shape ``(n, K, F)``."""
    n = M.shape[0]
    out = np.zeros((n, len(windows), M.shape[1]))
    for i, w in enumerate(windows):
        r = 2.0 / (w + 1.0)
        out[:, i] = faded(M, r) / (1.0 - (1.0 - r) ** np.arange(1, n + 1))[:, None]
    return out


def pooled_prior(logw, windows, pool=0.5, prior=0.25) -> np.ndarray:
    """The default's pooling over the features and its prior toward long candidates
    (``prior``: the longest candidate's log-weight over the shortest, one number or one per
    measurement)."""
    logw = (1.0 - pool) * logw + pool * logw.mean(axis=2, keepdims=True)
    prior = np.reshape(prior, (-1, 1, 1))
    return logw + prior * (np.log(windows) / np.log(windows[-1]))[None, :, None]


def shaped(shape: str, windows=CANDIDATES):
    """A rule: the default's evidence in another shape (``"one window"``, ``"faded"``,
    ``"two rates"``; see the module docstring)."""
    def rule(d):
        M = d["s100_M"]
        if shape == "faded":
            P = faded_means(M, windows)
            logw = pooled_prior(candidate_penalties(M, P), windows)
            return mixed_at_asks(d, logw, P)
        P = window_means(prefix(M), np.arange(M.shape[0]), windows)
        logw = candidate_penalties(M, P)
        if shape == "two rates":
            logw = np.maximum(logw, candidate_penalties(M, P, rate=0.01) - 1.0)
        logw = pooled_prior(logw, windows)
        if shape == "one window":
            w = np.exp(logw - logw.max(axis=1, keepdims=True))
            length = 2.0 ** ((w / w.sum(axis=1, keepdims=True))
                             * np.log2(windows)[None, :, None]).sum(axis=1)
            n_kept = np.minimum(np.maximum(np.round(length), 1),
                                np.arange(1, M.shape[0] + 1)[:, None]).astype(int)
            C, j = prefix(M), np.arange(M.shape[0])[:, None]
            one = (C[j + 1, np.arange(M.shape[1])] - C[j + 1 - n_kept, np.arange(M.shape[1])])
            return at_asks(d, one / n_kept)
        return mixed_at_asks(d, logw, P)
    return rule


def at_asks(d: dict, estimates: np.ndarray) -> np.ndarray:
    """The estimates ``(n, F)`` after the newest measurement at each ask (0 before any)."""
    idx = np.searchsorted(d["s100_t"], d["times"], side="right") - 1
    out = np.zeros((len(idx), estimates.shape[1]))
    out[idx >= 0] = estimates[idx[idx >= 0]]
    return out


def mixed_at_asks(d: dict, logw: np.ndarray, predictions: np.ndarray) -> np.ndarray:
    """The candidates' estimates weighted by ``exp(logw)``, at each ask."""
    w = np.exp(logw - logw.max(axis=1, keepdims=True))
    return at_asks(d, (w / w.sum(axis=1, keepdims=True) * predictions).sum(axis=1))


def above_noise(eta=1.0, rate=0.001):
    """A rule: the relative weights with the scale ``L_b - L_1 / 2``, the best loss above
    the noise of one measurement as the window of one sees it (``L_1 = 2 s^2 +`` drift)."""
    def rule(d):
        M = d["s100_M"]
        L = faded(window_errors(M, CANDIDATES)[0], rate)
        best = L.min(axis=1, keepdims=True)
        scale = np.maximum(best - 0.5 * L[:, :1], 0.02 * best)
        return series(d, -(L - best) / (eta * scale + 1e-12))
    return rule


def gap_corr(M, windows, rate: float = 0.001) -> np.ndarray:
    """Correlation of each window's mean with the measurement ``GAP`` ahead."""
    n = M.shape[0]
    rho = np.zeros((n, len(windows), M.shape[1]))
    j = np.arange(GAP, n)
    rho[GAP:] = faded_corr(window_means(prefix(M), j - GAP, windows), M[GAP:], rate)
    return rho


def split_corr(A, B, windows, rate: float = 0.001, target: int = 1) -> np.ndarray:
    """Correlation of each window's mean of one half with the mean of the other half's
    newest ``target`` measurements, averaged over the two halves."""
    j = np.arange(A.shape[0])
    t = np.array([target])
    TA, TB = window_means(prefix(A), j, t)[:, 0], window_means(prefix(B), j, t)[:, 0]
    return 0.5 * (faded_corr(window_means(prefix(A), j, windows), TB, rate)
                  + faded_corr(window_means(prefix(B), j, windows), TA, rate))


def series(d: dict, logw: np.ndarray | None, windows=CANDIDATES, key: str = "s100"):
    """Importances at the asks: windows' means weighted by ``exp(logw)`` (``None``: one
    window only)."""
    M, ends = d[f"{key}_M"], d[f"{key}_t"]
    idx = np.searchsorted(ends, d["times"], side="right") - 1
    out = np.zeros((len(idx), M.shape[1]))
    ok = idx >= 0
    means = window_means(prefix(M), idx[ok], windows)
    if logw is None:
        out[ok] = means[:, 0]
        return out
    lw = logw[idx[ok]]
    w = np.exp(lw - lw.max(axis=1, keepdims=True))
    out[ok] = (w / w.sum(axis=1, keepdims=True) * means).sum(axis=1)
    return out


def corr_log_weights(rho: np.ndarray, eta2: float | None, power: float | None) -> np.ndarray:
    """``(rho_k - rho_max) / eta2``, or with ``power`` ``p``: ``p log(rho_k / rho_max)``
    (weights proportional to ``rho_k^p``: a temperature relative to the best correlation)."""
    if power:
        pos = np.maximum(rho, 1e-6)
        return power * np.log(pos / pos.max(axis=1, keepdims=True))
    return (rho - rho.max(axis=1, keepdims=True)) / eta2


def mixture(eta=0.3, windows=CANDIDATES, gap_eta=None, split=None, split_eta=None, shift=0,
            fisher=False, corr_rate=0.001, target=1, power=None, rate=0.005):
    """A rule: the default mixture (``eta`` None: none), optionally times a correlation
    criterion (``fisher``: on Fisher's ``z = atanh(rho)``, whose noise does not depend on
    ``rho``)."""
    def rule(d):
        M = d["s100_M"]
        logw = mse_log_weights(M, windows, eta, rate) if eta else 0.0
        if gap_eta:
            rho = gap_corr(M, windows, corr_rate)
            logw = logw + corr_log_weights(rho, gap_eta, power)
        if split:
            rho = split_corr(d[f"{split}A_M"], d[f"{split}B_M"], windows, corr_rate, target)
            if shift:  # a half's window of 2w has the noise of the whole's window of w
                rho = np.concatenate([rho[:, shift:], np.repeat(rho[:, -1:], shift, 1)], 1)
            if fisher:
                rho = np.arctanh(np.clip(rho, -0.999, 0.999))
            logw = logw + corr_log_weights(rho, split_eta, power)
        return series(d, logw, windows)
    return rule


def fixed(w: int, key: str = "s100"):
    """A rule: the mean of the newest ``w`` measurements of ``key``."""
    return lambda d: series(d, None, np.array([w]), key)


FIXED = (1, 2, 4, 8, 16, 23, 32, 45, 64, 91, 128, 181, 256)
DEFAULT = ("paired weights: paired_eta 3, eta 0.5, long_prior 0.25, pool 0.5, windows up to "
           "128 and 192 (default)")
POWERS = "paired, windows of powers of two up to 256 (the default before)"
YOUNG = "paired, young_prior 3 over 50 measurements"
UNPOOLED = "paired weights, each feature on its own evidence (pool 0; the default before)"
FORMER = "relative weights x gap-corr, rate 0.001, eta 0.25 (former default)"
FINE = np.unique(np.round(2 ** np.arange(0, 8.01, 0.5)).astype(int))
RULES = {
    DEFAULT: (paired(windows=LONGEST), "none"),
    POWERS: (paired(), "none"),
    "paired, windows up to 128": (paired(windows=CANDIDATES[:-1]), "none"),
    "paired, windows up to 128 and 160": (paired(windows=np.append(CANDIDATES[:-1], 160)),
                                          "none"),
    "paired, windows up to 128 and 224": (paired(windows=np.append(CANDIDATES[:-1], 224)),
                                          "none"),
    "paired, windows up to 512": (paired(windows=2 ** np.arange(10)), "none"),
    YOUNG: (paired(young_prior=3.0, young_blocks=50), "none"),
    "paired, young_prior 1 over 100 measurements": (paired(young_prior=1.0, young_blocks=100),
                                                    "none"),
    "paired, young_prior 2 over 200 measurements": (paired(young_prior=2.0, young_blocks=200),
                                                    "none"),
    "paired, young_prior 3 over 100 measurements": (paired(young_prior=3.0, young_blocks=100),
                                                    "none"),
    "paired, young_prior 6 over 30 measurements": (paired(young_prior=6.0, young_blocks=30),
                                                   "none"),
    UNPOOLED: (paired(pool=0.0), "none"),
    FORMER: (mixture(eta=0.25, rate=0.001, gap_eta=0.3), "none"),
    "paired, pool 0.25": (paired(pool=0.25), "none"),
    "paired, pool 0.8": (paired(pool=0.8), "none"),
    "paired, pool 1 (one memory per stream)": (paired(pool=1.0), "none"),
    "paired, pool 0.5, long_prior 0.4": (paired(long_prior=0.4), "none"),
    "paired, pool 0.5, eta 0.35": (paired(eta=0.35), "none"),
    "paired, errors on the mean of the next 4 measurements": (paired(horizon=4), "none"),
    "paired, errors on the mean of the next 16 measurements": (paired(horizon=16), "none"),
    "paired, young_prior 1 (fading)": (paired(young_prior=1.0), "none"),
    "paired, young_prior 4 (fading)": (paired(young_prior=4.0), "none"),
    "paired, row_prior 0.5": (paired(row_prior=0.5), "none"),
    "paired, penalty + (z / 4)^2 / 2": (paired(z_square=4.0), "none"),
    "paired, one window of the mixture's mean log-length": (shaped("one window"), "none"),
    "paired, faded means as candidates (rate 2 / (k + 1))": (shaped("faded"), "none"),
    "paired, two fading rates (0.001; 0.01 with a handicap of 1)": (shaped("two rates"),
                                                                     "none"),
    "paired, z alone (no relative term)": (paired(eta=None), "none"),
    "paired, long_prior 0": (paired(long_prior=0.0), "none"),
    "paired, long_prior 0.5": (paired(long_prior=0.5), "none"),
    "paired, paired_eta 2": (paired(paired_eta=2.0), "none"),
    "paired, paired_eta 4": (paired(paired_eta=4.0), "none"),
    "paired, windows every sqrt(2)": (paired(windows=FINE), "none"),
    "paired, rate 0.002": (paired(rate=0.002), "none"),
    "paired x gap-corr (eta2 0.3)": (paired(gap_eta=0.3), "none"),
    "paired, sd of the difference, not its error (paired_eta 0.1)": (
        paired(paired_eta=0.1, eta=None, long_prior=0.0, n_eff=False), "none"),
    "relative weights, scale above the noise L_b - L_1 / 2 (eta 1)": (above_noise(), "none"),
    "gap-corr ratio alone, weights rho^3": (mixture(eta=None, rate=0.001, gap_eta=1, power=3),
                                            "none"),
    "mixture by errors alone (rate 0.005, eta 0.3; the default before the former)": (
        mixture(), "none"),
    "mixture, eta 0.5": (mixture(eta=0.5), "none"),
    "mixture, eta 0.2, windows every sqrt(2)": (mixture(eta=0.2, windows=FINE), "none"),
    "mixture, eta 0.5, windows every sqrt(2)": (mixture(eta=0.5, windows=FINE), "none"),
    "mixture x gap-corr (eta2 0.3)": (mixture(gap_eta=0.3), "none"),
    "mixture x gap-corr (eta2 0.1)": (mixture(gap_eta=0.1), "none"),
    "split-corr h5 alone (Fisher z, 0.3)": (mixture(eta=None, split="h5", split_eta=0.3,
                                                    fisher=True), "+50%"),
    "split-corr h5 alone, weights rho^7": (mixture(eta=None, split="h5", power=7), "+50%"),
    "split-corr h5 alone, target 10 measurements (0.1)": (
        mixture(eta=None, split="h5", split_eta=0.1, target=10), "+50%"),
    "mixture x split-corr h5 (eta2 0.1)": (mixture(split="h5", split_eta=0.1), "+50%"),
    "mixture (eta 0.2) x split-corr h5 (eta2 0.1)": (mixture(eta=0.2, split="h5",
                                                             split_eta=0.1), "+50%"),
    "mixture (eta 1) x split-corr h5 (eta2 0.1)": (mixture(eta=1.0, split="h5",
                                                           split_eta=0.1), "+50%"),
    "mixture x split-corr h10 (eta2 0.1)": (mixture(split="h10", split_eta=0.1), "+100%"),
    "s100 fixed 91 (1,000 rows)": (fixed(91), "none"),
    "b1000 fixed 1 (one 1,000-row forest)": (fixed(1, "b1000"), "none"),
    "b1000 fixed 4 (1,300 rows)": (fixed(4, "b1000"), "none"),
}


# -------------------------------------------------------------------------------- report

def window_scores() -> dict:
    """Committed per-stream scores of the sliding windows: ``{setting: {column: {seed: x}}}``."""
    runs = [json.loads((RANKINGS / f).read_text())["settings"] for f in WINDOW_RUNS]
    merged = bench.merge_baselines(runs)
    return {name: {c: dict(zip(e["seeds"], v)) for c, v in e["scores"].items()
                   if c.startswith("win")} for name, e in merged.items()}


def best_window(windows: dict, seeds: list[int]) -> tuple[str, float]:
    """The window column with the highest mean over ``seeds``."""
    return max(((c, float(np.mean([v[s] for s in seeds]))) for c, v in windows.items()),
               key=lambda cv: cv[1])


def mean_score(rule, data: list[dict]) -> float:
    """A rule's score averaged over recorded streams."""
    return float(np.mean([tracking_score(rule(d), d["truth"]) for d in data]))


def score_rules(settings, seeds_of, cache: Path) -> dict:
    """``{rule: {setting: mean score}}``, ``oracle`` included."""
    out: dict = {name: {} for name in [*RULES, "oracle (best fixed window in hindsight)"]}
    for s in settings:
        data = [dict(np.load(cache / f"{s.name}_{seed}.npz")) for seed in seeds_of(s)]
        for name, (rule, _) in RULES.items():
            out[name][s.name] = mean_score(rule, data)
        out["oracle (best fixed window in hindsight)"][s.name] = max(
            mean_score(fixed(w), data) for w in FIXED)
    return out


def criterion_and_score(data: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """Per candidate window: its loss under the mixture's criterion (squared error on the
    measurement ``GAP`` ahead, averaged after the first quarter of each stream over the
    features whose truth moves, relative to the best window's) and the benchmark's score of
    its plain mean, both averaged over the streams."""
    losses, scores = [], []
    for d in data:
        M = d["s100_M"]
        moving = np.flatnonzero(np.ptp(d["truth"], axis=0) > 0)
        err = window_errors(M, CANDIDATES)[0]
        losses.append(err[M.shape[0] // 4:][:, :, moving].mean(axis=(0, 2)))
        scores.append([tracking_score(fixed(w)(d), d["truth"]) for w in CANDIDATES])
    loss = np.mean(losses, axis=0)
    return loss / loss.min(), np.mean(scores, axis=0)


def criterion_table(settings, seeds_of, cache: Path, names=CRITERION_SETTINGS) -> list[str]:
    """The criterion beside the score, per window, at the slowest and fastest clipped walks."""
    lines = ["| setting | | " + " | ".join(str(w) for w in CANDIDATES) + " |",
             "|---|---|" + "---|" * len(CANDIDATES)]
    for s in settings:
        if s.name in names:
            data = [dict(np.load(cache / f"{s.name}_{seed}.npz")) for seed in seeds_of(s)]
            loss, score = criterion_and_score(data)
            lines.append(f"| {s.name} | criterion (x best) | "
                         + " | ".join(f"{v:.3f}" for v in loss) + " |")
            lines.append("| | score of the plain mean | "
                         + " | ".join(f"{v:.3f}" for v in score) + " |")
    return lines


def summary(scores: dict, best: dict, ref: str = "best window") -> list[str]:
    """One row per rule: its gaps to the reference (the best window, by default)."""
    lines = [f"| rule | extra tree-rows | mean gap | smallest gap | settings >= {ref} "
             "| slowest four (min) | fastest clipped (min) |", "|---|---|---|---|---|---|---|"]
    for name, per in scores.items():
        gaps = {s: per[s] - best[s][1] for s in per}
        slow = min(g for s, g in gaps.items() if any(t in s for t in SLOWEST))
        fast = min(g for s, g in gaps.items() if any(t in s for t in FASTEST_CLIPPED))
        cost = RULES[name][1] if name in RULES else "-"
        g = np.array(list(gaps.values()))
        lines.append(f"| {name} | {cost} | {g.mean():+.4f} | {g.min():+.3f} | "
                     f"{int((g >= 0).sum())}/{len(g)} | {slow:+.3f} | {fast:+.3f} |")
    return lines


def per_setting(scores: dict, best: dict, names: list[str],
                ref: str = "best window") -> list[str]:
    """Per setting: the reference and a few rules' means."""
    lines = [f"| setting | {ref} | " + " | ".join(names) + " |",
             "|---|---|" + "---|" * len(names)]
    for s, (col, val) in best.items():
        cells = [f"{scores[n][s]:.3f} ({scores[n][s] - val:+.3f})" for n in names]
        lines.append(f"| {s} | {col} {val:.3f} | " + " | ".join(cells) + " |")
    return lines


def measured(recorded: int, total: int, seconds: float) -> str:
    """Where this run's measurements came from, for the report's header."""
    if recorded == total:
        return f"Measurements: all {total} streams recorded in this run ({seconds:.0f} s)"
    cached = "read from the cache an earlier run of this script wrote (170 streams take about " \
        "330 s of two cores)"
    if recorded == 0:
        return f"Measurements: all {total} streams {cached}"
    return (f"Measurements: {recorded} of {total} streams recorded in this run "
            f"({seconds:.0f} s), the rest {cached}")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=10, help="streams per setting")
    ap.add_argument("--first-seed", type=int, default=1,
                    help="first stream of every setting (streams beyond the tenth have no "
                         "window columns: the rules are then compared with the former "
                         "default)")
    ap.add_argument("--jobs", type=int, default=2, help="recording processes")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/streamforest-memory-rules"),
                    help="where the recorded measurements are kept")
    ap.add_argument("--out", type=Path, default=OUT, help="report path")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    settings = bench.all_settings()

    def seeds_of(s):
        return [s.seed_base + args.first_seed - 1 + i for i in range(args.seeds)]

    t0 = time.perf_counter()
    jobs = [(s, seed, args.cache) for s in settings for seed in seeds_of(s)]
    recorded = 0
    with mp.get_context("spawn").Pool(args.jobs) as pool:
        for i, new in enumerate(pool.imap_unordered(_record_job, jobs), 1):
            recorded += new
            print(f"\rstreams ready: {i}/{len(jobs)}", end="", flush=True)
    record_s = time.perf_counter() - t0
    windows = window_scores()
    scores = score_rules(settings, seeds_of, args.cache)
    if all(set(seeds_of(s)) <= set(v) for s in settings for v in windows[s.name].values()):
        ref = "best window"
        best = {s.name: best_window(windows[s.name], seeds_of(s)) for s in settings}
        against = ("Gaps are a rule's mean score minus the best sliding window's (committed "
                   "columns, same streams).")
    else:
        ref = "former default"
        best = {s.name: ("", scores[FORMER][s.name]) for s in settings}
        against = ("These streams have no window columns: gaps are a rule's mean score minus "
                   f"the former default's ({FORMER}).")
    shown = [DEFAULT, POWERS, YOUNG, UNPOOLED, FORMER,
             "oracle (best fixed window in hindsight)", "split-corr h5 alone (Fisher z, 0.3)"]
    lines = ["# Memory rules replayed on recorded block measurements", "",
             f"{args.seeds} streams per "
             f"setting, from the stream {args.first_seed}. {measured(recorded, len(jobs), record_s)}"
             f"; replay {time.perf_counter() - t0 - record_s:.0f} s. "
             f"{against} See the script's docstring for the rules.", "",
             *summary(scores, best, ref), "",
             f"Per setting (gap to the {ref} in brackets):", "",
             *per_setting(scores, best, shown, ref), "",
             "What the criterion sees: each window's squared error on the measurement 10 "
             "ahead (after the first quarter of each stream, the drifting features, relative "
             "to the best window's) beside the score of its plain mean, per window length in "
             "measurements. Where the truth moves slowly the criterion ranks the windows as "
             "the score does; where a clipped walk bounces fast it is unpredictable 100 rows "
             "ahead, and the criterion ranks the longest window first while the score ranks "
             "a short one first:", "",
             *criterion_table(settings, seeds_of, args.cache), ""]
    write_results(args.out, "\n".join(lines))
    print("\n" + "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
