"""What every value that enters must be: text UTF-8 can encode, numbers finite and bounded.

The contracts' validators (:mod:`schemas.messages`), the plain type checks of the hot decoding
paths (:mod:`schemas.instances`, :mod:`schemas.batches`) and the worker's bulk kernel all hold
values to these rules, so the fast paths never accept what full validation refuses.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

#: largest magnitude of a number a producer may send: squares (1e200) and sums of squares over
#: any stream length stay finite in every learner's statistics
MAX_MAGNITUDE = 1e100


def is_text(s: str) -> bool:
    """Whether UTF-8 can encode ``s`` (no lone surrogate): every output and checkpoint must.

    Examples
    --------
    >>> is_text("UP"), is_text("héllo"), is_text(chr(0xD800))
    (True, True, False)
    """
    if s.isascii():
        return True
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def finite_floats(values: Iterable) -> bool:
    """True if every value is a Python float, finite and within +-:data:`MAX_MAGNITUDE`.

    A sum is finite only if every term is (NaN and infinities propagate); an overflowing sum
    of finite values gives a false "no", which only sends the message to full validation.

    Examples
    --------
    >>> finite_floats([0.5, -2.0]), finite_floats([1.0, float("nan")]), finite_floats([1])
    (True, False, False)
    >>> finite_floats([1e101])
    False
    """
    for v in values:
        if type(v) is not float:
            return False
    return math.isfinite(sum(values)) and max(map(abs, values)) <= MAX_MAGNITUDE
