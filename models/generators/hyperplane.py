"""Rotating-hyperplane stream with its ground-truth feature weights.

The stream of Hulten, Spencer & Domingos (KDD 2001) in the form used by MOA's
``HyperplaneGenerator`` and river's ``datasets.synth.Hyperplane``, and by Cassidy & Deviney
(IEEE BigData 2014, section III.A) to check online feature importances against the truth:

* ``x ~ U(0, 1)^d``; the label is ``1`` when ``sum_i a_i x_i >= a_0`` with
  ``a_0 = 0.5 * sum_i a_i`` (recomputed at every instance, so both classes stay equally
  likely), else ``0``; then the label is flipped with probability ``noise``.
* Initial weights ``a_i ~ U(0, 1)``. After each instance, each of the first ``K`` weights
  moves by ``T * s_i`` where ``s_i`` is its direction (``+1`` at the start), and each
  direction is reversed with probability ``S``. The other ``d - K`` weights never change.

Scaling of ``T``. ``T`` is the step of a drifting weight *per instance*, in the units of
the weights, exactly as MOA's ``-t`` (``magChange``) and river's ``mag_change``; ``S`` is a
probability (MOA's ``-s 10`` is ``S = 0.10``). MOA does not clip the weights (its bound
check is commented out) and neither do we, so with Cassidy's ``T = 1`` a drifting weight
performs a persistent random walk of step 1 that soon dwarfs the fixed weights in
``[0, 1]``; weights may become negative, which is harmless because only ``|a_i|`` matters
(the sign is absorbed by ``a_0``). Cassidy takes ``|a_i|`` as the true importance of
feature ``i``; :meth:`RotatingHyperplane.take` returns it next to every instance.

Two variants, off by default (the defaults give MOA's stream, bit for bit):

* ``clip=True``: the drifting weights stay in ``[0, 1]``, a reflecting persistent random
  walk. A step that would leave ``[0, 1]`` stops at the bound and reverses the direction, so
  at small ``T`` the weights keep sweeping the range of the fixed ones instead of wandering
  off (the unclipped walk makes a drifting feature dominate or vanish for good).
* ``switch_every=P``: abrupt drift of which features matter. After every ``P`` instances the
  whole weight vector is permuted by a fresh permutation drawn from the stream's generator;
  the drift (``K``, ``T``) keeps acting on the first ``K`` positions. With ``T = 0`` this is
  a stream of pure switches.

The noise draw is a plain Bernoulli(``noise``) (MOA draws an integer percent, river adds
0.01 to its uniform draw, which makes its effective noise 1 point lower).

This module uses only numpy's ``Generator`` (it is a data source, not a kernel).

References
----------
.. [1] G. Hulten, L. Spencer, P. Domingos, "Mining time-changing data streams", KDD 2001.
.. [2] A. P. Cassidy, F. A. Deviney, "Calculating feature importance in data streams with
   concept drift using Online Random Forest", IEEE BigData 2014.
"""

from __future__ import annotations

import numpy as np

from ..core._jit import njit


class RotatingHyperplane:
    """A seeded rotating-hyperplane stream that also yields the true weights.

    Parameters
    ----------
    n_features : int, default 10
        ``d``, the number of features.
    n_drift_features : int, default 2
        ``K``, how many weights drift (the first ``K`` features).
    mag_change : float, default 1.0
        ``T``, the change of a drifting weight per instance (see the module docstring).
    sigma : float, default 0.1
        ``S``, the probability that a drifting weight reverses direction after an instance.
    noise : float, default 0.05
        Probability of flipping a label.
    seed : int, default 1
        Seed of the ``numpy.random.Generator``; equal seeds give equal streams.
    clip : bool, default False
        Keep the drifting weights in ``[0, 1]`` by reflection (see the module docstring).
    switch_every : int, default 0
        ``P``: permute the weight vector after every ``P`` instances (0: never).

    Attributes
    ----------
    weights, directions : ndarray of shape (d,)
        The weights and drift directions that will label the next instance.
    n_drawn : int
        Instances drawn so far.

    Examples
    --------
    >>> gen = RotatingHyperplane(n_features=4, n_drift_features=1, seed=3)
    >>> X, y, W = gen.take(5)
    >>> X.shape, y.shape, W.shape
    ((5, 4), (5,), (5, 4))
    >>> bool((W[1:, 1:] == W[0, 1:]).all())  # only the first weight drifts
    True

    A clipped walk stays in ``[0, 1]`` however large the step:

    >>> _, _, W = RotatingHyperplane(n_drift_features=2, mag_change=0.3, clip=True).take(200)
    >>> bool(W.min() >= 0.0 and W.max() <= 1.0)
    True

    Switches permute which weight goes with which feature, every ``P`` instances:

    >>> gen = RotatingHyperplane(n_features=5, mag_change=0.0, switch_every=100, seed=2)
    >>> _, _, W = gen.take(200)
    >>> bool((W[99] == W[0]).all()), sorted(W[100]) == sorted(W[0])
    (True, True)
    """

    def __init__(self, n_features: int = 10, n_drift_features: int = 2, mag_change: float = 1.0,
                 sigma: float = 0.1, noise: float = 0.05, seed: int = 1, clip: bool = False,
                 switch_every: int = 0):
        if n_features < 1:
            raise ValueError("n_features must be >= 1")
        if not 0 <= n_drift_features <= n_features:
            raise ValueError("n_drift_features must be in [0, n_features]")
        if mag_change < 0:
            raise ValueError("mag_change must be >= 0")
        if switch_every < 0:
            raise ValueError("switch_every must be >= 0")
        for name, p in (("sigma", sigma), ("noise", noise)):
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1]")
        self.n_features = int(n_features)
        self.n_drift_features = int(n_drift_features)
        self.mag_change = float(mag_change)
        self.sigma = float(sigma)
        self.noise = float(noise)
        self.seed = int(seed)
        self.clip = bool(clip)
        self.switch_every = int(switch_every)
        self.n_drawn = 0
        self._rng = np.random.default_rng(self.seed)
        self.weights = self._rng.random(self.n_features)
        self.directions = np.zeros(self.n_features)
        self.directions[: self.n_drift_features] = 1.0

    def take(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Draw the next ``n`` instances.

        Parameters
        ----------
        n : int
            How many instances; ``take(a)`` then ``take(b)`` gives the rows of
            ``take(a + b)``.

        Returns
        -------
        X : ndarray of shape (n, d)
            Features in ``[0, 1)``.
        y : ndarray of shape (n,)
            Labels in ``{0, 1}`` (int64), noise included.
        W : ndarray of shape (n, d)
            ``|a_i|``, the true importance of each feature for each instance (the weights
            that labelled it, before the drift step that follows it).
        """
        n = int(n)
        d = self.n_features
        if n <= 0:
            return np.empty((0, d)), np.empty(0, dtype=np.int64), np.empty((0, d))
        parts = []
        while n > 0:
            # a switch draws its permutation between two segments, at a fixed stream
            # position, so the draws do not depend on how the stream is cut into calls
            m = n if not self.switch_every else min(n, self.switch_every
                                                    - self.n_drawn % self.switch_every)
            parts.append(self._segment(m))
            self.n_drawn += m
            n -= m
            if self.switch_every and self.n_drawn % self.switch_every == 0:
                self.weights = self.weights[self._rng.permutation(d)]
        if len(parts) == 1:
            return parts[0]
        return tuple(np.concatenate(p) for p in zip(*parts))

    def _segment(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``n >= 1`` instances with no switch among them (see :meth:`take`)."""
        d, k = self.n_features, self.n_drift_features
        # one row of uniforms per instance (features, noise, reversals), drawn row-major, so
        # take(a) then take(b) gives exactly the rows of take(a + b)
        U = self._rng.random((n, d + 1 + k))
        X = np.ascontiguousarray(U[:, :d])
        flip = U[:, d] < self.noise
        reverse = U[:, d + 1:] < self.sigma
        A = np.tile(self.weights, (n, 1))
        if k:
            walk = self._clipped_walk if self.clip else self._free_walk
            A[:, :k] = walk(reverse)
        score, half = _scores(A, X)
        y = (score >= half).astype(np.int64)
        y[flip] = 1 - y[flip]
        return X, y, np.abs(A)

    def _free_walk(self, reverse: np.ndarray) -> np.ndarray:
        """MOA's unclipped walk, vectorized: the drifting weights of each instance.

        ``reverse`` (n, K) says which directions reverse after each instance; the state
        (``weights``, ``directions``) moves to after the last instance.
        """
        k = self.n_drift_features
        # direction used after instance t: the start direction times (-1)^(reversals after
        # instances 0..t-1); the weight of instance t adds the steps taken after 0..t-1
        sign = np.where(reverse, -1.0, 1.0)
        dirs_after = self.directions[:k] * np.cumprod(sign, axis=0)   # direction after t's flip
        dirs_used = np.vstack([self.directions[:k][None, :], dirs_after[:-1]])  # step after t
        steps = self.mag_change * dirs_used
        # a sequential running sum from the current weights (np.add.accumulate adds in
        # order), so that chunked draws give bit-identical weights
        path = np.cumsum(np.vstack([self.weights[None, :k], steps]), axis=0)
        self.weights[:k] = path[-1]
        self.directions[:k] = dirs_after[-1]
        return path[:-1]

    def _clipped_walk(self, reverse: np.ndarray) -> np.ndarray:
        """The walk reflected at the bounds of ``[0, 1]``: the drifting weights of each instance.

        A step that would leave ``[0, 1]`` stops at the bound and reverses the direction;
        the random reversal (``reverse``) follows it. Sequential, since each clip depends on
        the path so far (a loop over rows is cheap next to any learner).
        """
        k, T = self.n_drift_features, self.mag_change
        w = self.weights[:k].copy()
        s = self.directions[:k].copy()
        out = np.empty((reverse.shape[0], k))
        for t, flips in enumerate(reverse):
            out[t] = w
            w += T * s
            low, high = w < 0.0, w > 1.0
            w[low], w[high] = 0.0, 1.0
            s[low | high] *= -1.0
            s[flips] *= -1.0
        self.weights[:k] = w
        self.directions[:k] = s
        return out


@njit
def _scores(A, X):
    """Per row ``sum_j A_ij X_ij`` and ``0.5 sum_j A_ij``, summed left to right: a fixed
    order, so the labels are the same on every CPU (a matrix product or ``einsum`` may
    sum in an order set by the CPU's vector width)."""
    n, d = A.shape
    score = np.empty(n)
    half = np.empty(n)
    for i in range(n):
        s = 0.0
        t = 0.0
        for j in range(d):
            s += A[i, j] * X[i, j]
            t += A[i, j]
        score[i] = s
        half[i] = 0.5 * t
    return score, half
