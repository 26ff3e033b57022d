"""Elementary functions whose results are the same on every x86-64 CPU.

Why the core does not call ``math.exp`` or ``np.exp``: the C library and numpy pick an
implementation of ``exp``, ``log``, ``pow``, ``erf`` and ``lgamma`` by the CPU they run on.
glibc has variants for CPUs with FMA (a fused multiply-add rounds once where two
instructions round twice); numpy has AVX-512 variants of ``exp``, ``log``, ``log2`` and
``power``. Each is accurate to about one unit in the last place, and they disagree in that
place for roughly one argument in a thousand. A learner turns such a difference into another
split, another vote or another alert, so predictions, rankings and checkpoints would depend on
the node a stream runs on.

The functions here use only the operations IEEE 754 defines exactly (``+ - * /``, ``sqrt``,
comparisons, scaling by a power of two with ``ldexp`` and ``frexp``), in a fixed order, and
numba's kernels are compiled without ``fastmath``, so LLVM never fuses a multiply into an add
or reorders a sum (:mod:`models.core._jit`). The results are therefore bit-identical on every CPU,
whatever the vector width numba or numpy choose. Accuracy is that of a C library: ``exp`` and
``log`` within one unit in the last place of glibc's (and equal to it for 98-99% of arguments),
``log2`` and ``erf`` within two, ``lgamma`` within ``1e-14`` (``tests/models/test_fmath.py``);
``exp`` and ``erf`` as fast as glibc's, ``log`` about 1.4 times its time.

Methods (textbook; see Muller, *Elementary Functions*, 3rd ed., 2016, and Tang, ACM TOMS 15,
1989): ``exp`` reduces the argument by multiples of ``ln 2 / 64`` split in two parts (Cody &
Waite 1980), takes ``2^(j/64)`` from a table and the rest from a short Taylor polynomial;
``log`` reduces to ``[sqrt(1/2), sqrt(2))``, takes the logarithm of the nearest of 183 centres
from a table and the rest from a short Taylor polynomial of ``log(1 + r)``; the tables are
computed at import in 40-digit decimal arithmetic (the same digits on every machine). ``erf``
uses its Maclaurin series near 0 and Taylor polynomials at the centres of short intervals
beyond, whose coefficients (the derivatives of ``erf`` are Hermite polynomials times a
Gaussian; Abramowitz & Stegun 7.1.19) are computed at import the same way; ``lgamma`` shifts the
argument above 10 and uses Stirling's series. ``sqrt`` needs nothing here: IEEE 754 rounds it
correctly everywhere.

Examples
--------
>>> from models.core._fmath import exp, log, log2, erf
>>> exp(0.0), log(1.0), log2(8.0), erf(0.0)
(1.0, 0.0, 3.0, 0.0)
>>> abs(exp(1.0) - 2.718281828459045) < 1e-15
True
"""

from __future__ import annotations

import math
import struct
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np

from ._jit import njit

#: ln 2 to 40 digits (OEIS A002162): more than twice double precision
_LN2 = "0.6931471805599453094172321214581765680755"


def _split(value: Fraction, zero_bits: int) -> tuple[float, float]:
    """``value`` as ``hi + lo``: ``hi`` the nearest double with its lowest ``zero_bits``
    bits cleared (so that ``k * hi`` is exact for small integers ``k``), ``lo`` the rest."""
    bits = struct.unpack("<Q", struct.pack("<d", float(value)))[0]
    hi = struct.unpack("<d", struct.pack("<Q", bits & ~((1 << zero_bits) - 1)))[0]
    return hi, float(value - Fraction(hi))


def _exp_table(n: int) -> np.ndarray:
    """Rows ``(hi, lo)`` of ``2^(j/n)``, ``j = 0 .. n-1``, from 40-digit decimal arithmetic
    (software arithmetic: the same digits on every machine)."""
    with localcontext() as ctx:
        ctx.prec = 40
        rows = []
        for j in range(n):
            v = (Decimal(j) / n * Decimal(_LN2)).exp()
            rows.append((float(v), float(v - Decimal(float(v)))))
    return np.array(rows)


def _log_table() -> np.ndarray:
    """Rows ``(c, 1/c, hi, lo)`` for the centres ``c = 0.703125 + j/256`` covering
    ``[sqrt(1/2), sqrt(2))`` (``c`` has 10 significant bits, so ``m - c`` is exact; row 76 is
    ``c = 1``), with ``log c = hi + lo`` from 40-digit decimal arithmetic."""
    with localcontext() as ctx:
        ctx.prec = 40
        rows = []
        for j in range(_LOG_ROWS):
            c = Decimal("0.703125") + Decimal(j) / 256
            v = c.ln()
            rows.append((float(c), float(1 / c), float(v), float(v - Decimal(float(v)))))
    return np.array(rows)


_EXP_N = 64  # 2^(j/64) from the table, the rest by a polynomial
_EXP_T = _exp_table(_EXP_N)
# ln 2 / 64 in two parts: k * hi is exact for |k| < 2^20 (|k| < 69,000 here)
_LN2_N_HI, _LN2_N_LO = _split(Fraction(_LN2) / _EXP_N, 20)
_INV_LN2_N = float(_EXP_N / Fraction(_LN2))
_EXP_MAX = 709.782712893384  # largest x with a finite exp(x)
_EXP_MIN = -745.1332191019412  # below: exp(x) rounds to 0
#: 1 / n! for n = 2 .. 6: exp(r) - 1 - r for |r| <= ln 2 / 128 to 2^-63
_B2, _B3, _B4, _B5, _B6 = (1.0 / math.factorial(n) for n in range(2, 7))
_LOG_ROWS = 183
_LOG_T = _log_table()
_LN2_HI, _LN2_LO = _split(Fraction(_LN2), 32)  # k * hi exact for every exponent k
_INV_LN2 = 1.4426950408889634  # 1 / ln 2
_SQRT2 = 1.4142135623730951
#: (-1)^(n+1) / n for n = 2 .. 7: log(1 + r) - r for |r| <= 0.0028 to 2^-63 of r
_A2, _A3, _A4, _A5, _A6, _A7 = ((-1.0) ** (n + 1) / n for n in range(2, 8))
_HALF_LOG_2PI = 0.9189385332046727  # log(2 pi) / 2, correctly rounded
#: Stirling's series B_2k / (2k (2k - 1)) for k = 1 .. 7
_STIRLING = (1.0 / 12.0, -1.0 / 360.0, 1.0 / 1260.0, -1.0 / 1680.0, 1.0 / 1188.0,
             -691.0 / 360360.0, 1.0 / 156.0)


@njit(inline="always")
def _horner(c, x):
    """``c[0] + x (c[1] + x (c[2] + ...))``: a polynomial in one fixed order."""
    p = c[len(c) - 1]
    for i in range(len(c) - 2, -1, -1):
        p = c[i] + x * p
    return p


@njit(inline="always")
def _pow2(k):
    """``2^k`` for ``-1022 <= k <= 1023``, built from its bits (exact, and no call)."""
    return np.int64((k + 1023) << 52).view(np.float64)


@njit
def exp(x):
    """``e ** x``, the same bits on every CPU (see the module doc).

    ``x = (64 m + j) ln 2 / 64 + r`` with ``|r| <= ln 2 / 128`` (the reduction of Cody & Waite
    with ``ln 2 / 64`` in two parts); ``e^x = 2^m 2^(j/64) e^r``, ``2^(j/64)`` from a table to
    twice double precision, ``e^r - 1`` by its Taylor polynomial of degree 6.

    Examples
    --------
    >>> exp(-1.0) == 1.0 / exp(1.0) or abs(exp(-1.0) - 0.36787944117144233) < 1e-16
    True
    >>> exp(1000.0), exp(-1000.0)
    (inf, 0.0)
    """
    if not x <= _EXP_MAX:
        return x if x != x else math.inf
    if x < _EXP_MIN:
        return 0.0
    k = int(math.floor(x * _INV_LN2_N + 0.5))
    r = (x - k * _LN2_N_HI) - k * _LN2_N_LO
    j = k & (_EXP_N - 1)
    m = k >> 6  # floor(k / 64)
    r2 = r * r
    p = r + r2 * ((_B2 + _B3 * r) + r2 * ((_B4 + _B5 * r) + r2 * _B6))
    t = _EXP_T[j, 0]
    y = t + (_EXP_T[j, 1] + t * p)  # 2^(j/64) (1 + p), the small parts summed first
    if -1022 <= m <= 1022:
        return y * _pow2(m)
    return math.ldexp(y, m)  # results near overflow or below the normal range


@njit(inline="always")
def _log_reduce(x):
    """``(e, j, r)`` with ``x = 2^e m``, ``m`` in ``[sqrt(1/2), sqrt(2))``, ``c_j`` the
    table's centre nearest ``m`` and ``r = (m - c_j) / c_j`` (``x`` positive and finite)."""
    b = np.float64(x).view(np.int64)
    top = b >> 52
    if top == 0:  # subnormal: scaled by 2^54 first
        b = np.float64(x * 18014398509481984.0).view(np.int64)
        top = (b >> 52) - 54
    e = top - 1023
    m = np.int64((b & 0xFFFFFFFFFFFFF) | 0x3FF0000000000000).view(np.float64)
    if m > _SQRT2:
        m *= 0.5
        e += 1
    j = int((m - 0.703125) * 256.0 + 0.5)
    return e, j, (m - _LOG_T[j, 0]) * _LOG_T[j, 1]


@njit(inline="always")
def _log1p_small(r):
    """``log(1 + r) - r`` for ``|r| <= 0.0028``, by its Taylor polynomial of degree 7."""
    r2 = r * r
    return r2 * ((_A2 + _A3 * r) + r2 * ((_A4 + _A5 * r) + r2 * (_A6 + _A7 * r)))


@njit
def log(x):
    """Natural logarithm, the same bits on every CPU (``-inf`` at 0, ``nan`` below).

    ``x = 2^e m``, ``log x = e ln 2 + log c + log(1 + r)`` with ``c`` the table's centre
    nearest ``m`` (``log c`` to twice double precision) and ``|r| <= 0.0028``; the sum of the
    two large terms keeps its rounding error (Fast2Sum), so the result is within one unit in
    the last place of the true value.

    Examples
    --------
    >>> log(1.0), log(0.0)
    (0.0, -inf)
    >>> abs(log(10.0) - 2.302585092994046) < 1e-15
    True
    """
    if not 0.0 < x < math.inf:
        return -math.inf if x == 0.0 else (x if x == math.inf else math.nan)
    e, j, r = _log_reduce(x)
    k = float(e)
    a = k * _LN2_HI  # exact
    hi = _LOG_T[j, 2]
    t = a + hi
    err = hi - (t - a)  # exact: |a| >= |hi| unless e == 0, where t == hi and err == 0
    return t + (r + (_log1p_small(r) + (_LOG_T[j, 3] + k * _LN2_LO + err)))


@njit
def log2(x):
    """Base-2 logarithm, the same bits on every CPU; exact at powers of two.

    Examples
    --------
    >>> log2(1024.0), log2(0.5)
    (10.0, -1.0)
    """
    if not 0.0 < x < math.inf:
        return -math.inf if x == 0.0 else (x if x == math.inf else math.nan)
    e, j, r = _log_reduce(x)
    y = _LOG_T[j, 2] + (_LOG_T[j, 3] + (r + _log1p_small(r)))  # log m; 0 at m = 1
    return float(e) + y * _INV_LN2


@njit
def pow_positive(x, y):
    """``x ** y`` for ``x >= 0`` as ``exp(y log x)``; its relative error grows with
    ``|y log x|`` (about that many units in the last place).

    Examples
    --------
    >>> pow_positive(4.0, 0.5), pow_positive(0.0, 2.0), pow_positive(2.0, 0.0)
    (2.0, 0.0, 1.0)
    """
    if y == 0.0:
        return 1.0
    if x == 0.0:
        return 0.0 if y > 0.0 else math.inf
    return exp(y * log(x))


@njit
def ipow(x, n):
    """``x ** n`` for an integer ``n >= 0`` by repeated squaring (only multiplications, so
    the rounding is the same everywhere).

    Examples
    --------
    >>> ipow(0.5, 3), ipow(3.0, 0)
    (0.125, 1.0)
    """
    result = 1.0
    base = x
    k = n
    while k > 0:
        if k & 1:
            result *= base
        base *= base
        k >>= 1
    return result


def _erf_tables(width: float = 0.125, top: float = 6.0, degree: int = 12):
    """Coefficients of :func:`erf`, computed once at import in 60-digit decimal arithmetic
    (software arithmetic: the same digits on every machine) and rounded to doubles.

    ``series[n]``: the Maclaurin series ``erf(x) = x sum_n series[n] x^(2n)`` used below
    ``0.5``, ``2/sqrt(pi) (-1)^n / (n! (2n+1))``. ``taylor[j, n]``: the Taylor coefficients
    of ``erf`` at the centre ``c = (j + 1/2) width`` of interval ``j``, ``erf(c)`` and
    ``erf^(n)(c) / n! = 2/sqrt(pi) (-1)^(n-1) H_(n-1)(c) exp(-c^2) / n!`` (``H`` the
    Hermite polynomials), for the intervals from ``0.5`` to ``top``.
    """
    with localcontext() as ctx:
        ctx.prec = 60
        pi = Decimal("3.14159265358979323846264338327950288419716939937510582097494")
        two_over_sqrt_pi = 2 / pi.sqrt()
        series = [two_over_sqrt_pi * (-1) ** n / (math.factorial(n) * (2 * n + 1))
                  for n in range(14)]

        def erf_exact(c: Decimal) -> Decimal:
            total, n, term = Decimal(0), 0, c
            while True:  # term = c^(2n+1) / n!
                add = term / (2 * n + 1) * (-1) ** n
                total += add
                if n > 10 and abs(add) < Decimal(10) ** -55:
                    return two_over_sqrt_pi * total
                n += 1
                term = term * c * c / n

        rows = []
        for j in range(int(0.5 / width), int(top / width)):
            c = (Decimal(j) + Decimal("0.5")) * Decimal(str(width))
            gauss = two_over_sqrt_pi * (-c * c).exp()
            hermite = [Decimal(1), 2 * c]
            while len(hermite) < degree:
                n = len(hermite) - 1
                hermite.append(2 * c * hermite[n] - 2 * n * hermite[n - 1])
            rows.append([erf_exact(c)] + [gauss * (-1) ** (n - 1) * hermite[n - 1]
                                          / math.factorial(n) for n in range(1, degree + 1)])
    return (np.array([float(v) for v in series]),
            np.array([[float(v) for v in row] for row in rows]))


_ERF_WIDTH = 0.125
_ERF_FIRST = 4  # the Taylor intervals start at 0.5 = 4 widths
_ERF_SERIES, _ERF_TAYLOR = _erf_tables(_ERF_WIDTH)


@njit
def erf(x):
    """The error function, the same bits on every CPU.

    Below 0.5 its Maclaurin series (relative accuracy near 0); up to 6 a degree-12 Taylor
    polynomial at the centre of the ``1/8``-wide interval holding ``|x|``; beyond, +-1
    (``erfc(6) = 2e-17`` is below half an ulp of 1). Coefficients: :func:`_erf_tables`.

    Examples
    --------
    >>> erf(0.0), erf(10.0), erf(-10.0)
    (0.0, 1.0, -1.0)
    >>> abs(erf(0.5) - 0.5204998778130465) < 1e-15
    True
    """
    if x != x:
        return x
    ax = abs(x)
    if ax >= 6.0:
        value = 1.0
    elif ax < 0.5:
        z = ax * ax
        s = _ERF_SERIES
        p = s[13]
        for n in range(12, -1, -1):
            p = s[n] + z * p
        value = ax * p
    else:
        j = int(ax * 8.0)  # 1 / _ERF_WIDTH
        row = _ERF_TAYLOR[j - _ERF_FIRST]
        d = ax - (j + 0.5) * _ERF_WIDTH
        p = row[12]
        for n in range(11, 0, -1):
            p = row[n] + d * p
        value = row[0] + d * p
    return value if x >= 0.0 else -value


@njit
def lgamma(x):
    """``log Gamma(x)`` for ``x > 0``, the same bits on every CPU.

    Below 10 the argument is shifted up (``Gamma(x) = Gamma(x + n) / (x (x+1) ... )``);
    from 10 Stirling's series to ``x^-13`` is exact to double precision. The shift costs a
    few units of the shifted value's last place: within ``1e-14`` of the true value (the
    Student-t tails of the forgetful forest's tree test need far less).

    Examples
    --------
    >>> lgamma(1.0), lgamma(2.0)
    (0.0, 0.0)
    >>> abs(lgamma(0.5) - 0.5723649429247001) < 1e-14
    True
    """
    if not x > 0.0:
        return math.nan if x != x or x < 0.0 else math.inf
    if x == 1.0 or x == 2.0:
        return 0.0
    shift = 1.0
    while x < 10.0:
        shift *= x
        x += 1.0
    inv = 1.0 / x
    inv2 = inv * inv
    value = (x - 0.5) * log(x) - x + _HALF_LOG_2PI + inv * _horner(_STIRLING, inv2)
    return value - log(shift) if shift != 1.0 else value


@njit
def _exp_flat(x, out):
    for i in range(x.shape[0]):
        out[i] = exp(x[i])


@njit
def _log_flat(x, out):
    for i in range(x.shape[0]):
        out[i] = log(x[i])


def _elementwise(kernel, x) -> np.ndarray:
    a = np.ascontiguousarray(x, dtype=np.float64)
    out = np.empty_like(a)
    kernel(a.reshape(-1), out.reshape(-1))
    return out


def exp_array(x) -> np.ndarray:
    """:func:`exp` of every element of ``x`` (any shape): numpy's ``np.exp`` in the core's
    Python code differs in the last place between CPUs with and without AVX-512.

    Examples
    --------
    >>> exp_array(np.array([[0.0, 1.0]])).shape
    (1, 2)
    """
    return _elementwise(_exp_flat, x)


def log_array(x) -> np.ndarray:
    """:func:`log` of every element of ``x`` (any shape), in place of ``np.log`` (see
    :func:`exp_array`).

    Examples
    --------
    >>> log_array([1.0, 4.0]).tolist() == [0.0, 2 * log(2.0)]
    True
    """
    return _elementwise(_log_flat, x)
