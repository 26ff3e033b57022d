"""The one error a message can fail with: :class:`DecodeError`.

Every way an incoming message can be refused (bytes that are neither msgpack nor JSON, a
schema version this worker does not read, a missing or mistyped field, NaN in the features,
the wrong feature count, a message over the size limit) ends in a :class:`DecodeError` with a
short machine ``code``, a human ``reason`` and the field path ``where``. The worker copies the
code and the text into the dead-letter headers, so a producer can see at once what to fix.
"""

from __future__ import annotations

# machine codes (stable: they travel in dead-letter headers and appear in metrics labels)
NOT_DECODABLE = "not_decodable"  # neither msgpack nor JSON, or an unknown content-type
NOT_AN_OBJECT = "not_an_object"  # the top level is not a map
OVERSIZED = "oversized"  # more bytes than the configured limit
UNKNOWN_VERSION = "unknown_version"  # field `v` names a schema version this code does not read
MISSING_FIELD = "missing_field"  # a required field is absent
INVALID_FIELD = "invalid_field"  # wrong type, out of range, unknown field, inconsistent fields
NON_FINITE = "non_finite"  # NaN or infinity where a finite number is required
OUT_OF_RANGE = "out_of_range"  # a finite number beyond +-1e100 (its square would overflow)
INVALID_TEXT = "invalid_text"  # a string UTF-8 cannot encode (a lone surrogate from a JSON escape)
FEATURE_COUNT = "feature_count"  # row width differs from the stream's feature count
MISSING_FEATURE = "missing_feature"  # a mapping row lacks one of the stream's feature names
UNKNOWN_FEATURE = "unknown_feature"  # a mapping row has a name the stream does not know
TOO_LONG = "too_long"  # a class label, string id or feature name over its length limit
TOO_MANY_FEATURES = "too_many_features"  # a row wider than the limit
UNKNOWN_KIND = "unknown_kind"  # an sf-kind header naming no record kind of the instances topic
KEY_MISMATCH = "key_mismatch"  # a record whose stream is not the one its message key names
OUTPUT_TOO_LARGE = "output_too_large"  # an output bigger than its topic takes (not a decode error)

CODES = frozenset(
    {
        NOT_DECODABLE,
        NOT_AN_OBJECT,
        OVERSIZED,
        UNKNOWN_VERSION,
        MISSING_FIELD,
        INVALID_FIELD,
        NON_FINITE,
        OUT_OF_RANGE,
        INVALID_TEXT,
        FEATURE_COUNT,
        MISSING_FEATURE,
        UNKNOWN_FEATURE,
        TOO_LONG,
        TOO_MANY_FEATURES,
        UNKNOWN_KIND,
        KEY_MISMATCH,
        OUTPUT_TOO_LARGE,
    }
)


class DecodeError(ValueError):
    """A message that cannot be turned into its contract.

    Parameters
    ----------
    code : str
        Short machine code, one of :data:`CODES`.
    reason : str
        What is wrong, for a person (values and limits included).
    where : str, optional
        Path of the offending field, e.g. ``"x[3]"``, ``"x['temp']"`` or ``"y"``; empty
        when the message as a whole is at fault.

    Examples
    --------
    >>> err = DecodeError("non_finite", "must be a finite number, got nan", "x[3]")
    >>> str(err)
    'non_finite at x[3]: must be a finite number, got nan'
    >>> err.code, err.where
    ('non_finite', 'x[3]')
    """

    def __init__(self, code: str, reason: str, where: str = "") -> None:
        self.code = code
        self.reason = reason
        self.where = where
        super().__init__(code, reason, where)

    def __str__(self) -> str:
        if self.where:
            return f"{self.code} at {self.where}: {self.reason}"
        return f"{self.code}: {self.reason}"

    def __repr__(self) -> str:
        return f"DecodeError({self.code!r}, {self.reason!r}, {self.where!r})"

    def __reduce__(self):
        # keep the three attributes through pickling (multiprocessing, pytest-xdist)
        return (type(self), (self.code, self.reason, self.where))


def key_mismatch_error(key: str, noun: str, stream: str) -> DecodeError:
    """``key_mismatch``: a record (``noun``: "instance", "batch", "label") of ``stream`` under
    the message key of stream ``key``; the key decides the partition, and so the worker.

    Examples
    --------
    >>> str(key_mismatch_error("s1", "label", "s2"))
    "key_mismatch: message key 's1' differs from the label's stream 's2'"
    """
    return DecodeError(KEY_MISMATCH, f"message key {key!r} differs from the {noun}'s stream "
                       f"{stream!r}")
