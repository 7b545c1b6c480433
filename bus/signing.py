"""Entry signatures and token hashes (SPEC §4, §9).

The signature is an HMAC-SHA256, keyed with AGENT_SALON_SECRET, over a canonical JSON
array of the fields a reader trusts. A row changed outside the bus no longer matches and
reads as tampered.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime
from decimal import Decimal

from django.conf import settings


def iso_ms(ts: datetime) -> str:
    """UTC, ISO 8601, millisecond precision: the wire format of every timestamp."""
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def canonical(*, id, room, ts, sender, type, to, re, content, meta) -> bytes:
    fields = [
        str(id),
        room,
        iso_ms(ts),
        sender,
        type,
        list(to),
        str(re) if re else None,
        content,
        meta,
    ]
    # surrogatepass: a row altered to hold a lone surrogate must read as tampered, not crash.
    return _dump(fields).encode("utf-8", "surrogatepass")


def _dump(value) -> str:
    """Compact JSON with sorted keys, like json.dumps(sort_keys=True, ensure_ascii=False),
    except that every number is written by its decimal value (see _number)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _number(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        items = sorted((str(k), v) for k, v in value.items())
        return "{" + ",".join(f"{_dump(k)}:{_dump(v)}" for k, v in items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_dump(v) for v in value) + "]"
    raise TypeError(f"cannot sign a {type(value).__name__}")


def _number(value: int | float) -> str:
    """A JSON number as digits and exponent with trailing zeros moved into the exponent.

    A JSON column may hand a number back spelt differently: PostgreSQL's jsonb keeps
    numbers as decimals, so 1e20 comes back as the int 100000000000000000000, 100.0 as
    100.0 but 1.5e300 as a 301-digit int, and -0.0 as 0. The decimal value is what
    survives, so that is what is signed (exactly: no rounding to a precision).
    """
    number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    if not number.is_finite():  # never stored (meta refuses NaN/Infinity), but never crash
        return json.dumps(value)
    sign, digits, exponent = number.as_tuple()
    text = "".join(map(str, digits))
    stripped = text.rstrip("0")
    if not stripped:
        return "0"
    exponent += len(text) - len(stripped)
    return f"{'-' if sign else ''}{stripped}e{exponent}"


def _key() -> bytes:
    return settings.SALON_SECRET.encode()


def sign(**fields) -> str:
    return hmac.new(_key(), canonical(**fields), hashlib.sha256).hexdigest()


def verify(signature: str, **fields) -> bool:
    return hmac.compare_digest(signature or "", sign(**fields))


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
