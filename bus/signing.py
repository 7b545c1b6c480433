"""Entry signatures and token hashes.

A signature is an HMAC-SHA256, keyed with AGENT_SALON_SECRET, over the canonical JSON of
an entry's fields. A row changed outside the bus no longer matches and reads as tampered.

* Version 2 (`v2:` + the MAC in URL-safe base64, 46 characters) covers every stored
  field a reader sees or filters on: id, room, seq, ts, sender, sender agent, type, to,
  re, content, meta, via, sender address and sender session. Only delivered_to and
  delivery_errors are left out: the push path appends to them after the entry is
  stored, and they say what happened to the entry, not what it is.
* Version 1 (64 hex digits) covered id, room, ts, sender, type, to, re, content and
  meta. Migration 0007 re-signed as version 2 every row whose version-1 signature
  matched (a row that did not match stays as it was: tampered). A version-1 row that
  verifies still reads as untampered — a process of an older version may have written
  it since — and `verdict` says OLD, so the staff page can say what it does not cover.

Verification never raises: a row that cannot even be put in canonical form was not
written by the bus, and reads as tampered.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime
from decimal import Decimal
from json.encoder import encode_basestring

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

VALID, OLD, TAMPERED = "valid", "old", "tampered"
V2_PREFIX = "v2:"


def iso_ms(ts: datetime) -> str:
    """UTC, ISO 8601, millisecond precision: the wire format of every timestamp."""
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


# ---------------------------------------------------------------- canonical forms


def canonical_v1(fields: dict) -> bytes:
    """Version 1: a JSON array of the nine fields signed before 2026-12."""
    values = [
        str(fields["id"]),
        fields["room"],
        iso_ms(fields["ts"]),
        fields["sender"],
        fields["type"],
        list(fields["to"]),
        str(fields["re"]) if fields["re"] else None,
        fields["content"],
        fields["meta"],
    ]
    # surrogatepass: a row altered to hold a lone surrogate must read as tampered, not crash.
    return _dump(values).encode("utf-8", "surrogatepass")


def canonical_v2(fields: dict) -> bytes:
    """Version 2: a JSON object of every field a reader sees or filters on."""
    values = {
        "v": 2,
        "id": str(fields["id"]),
        "room": fields["room"],
        "seq": fields["seq"],
        "ts": iso_ms(fields["ts"]),
        "sender": fields["sender"],
        "senderAgent": fields["sender_agent"],
        "type": fields["type"],
        "to": fields["to"],
        "re": str(fields["re"]) if fields["re"] else None,
        "content": fields["content"],
        "meta": fields["meta"],
        "via": fields["via"],
        "senderAddr": fields["sender_addr"],
        "senderSession": fields["sender_session"],
    }
    return _dump(values).encode("utf-8", "surrogatepass")


def _dump(value) -> str:
    """Compact JSON with sorted keys, like json.dumps(sort_keys=True, ensure_ascii=False),
    except that every number is written by its decimal value (see _number). The most
    frequent kinds are tested first: every read verifies every entry it returns."""
    if isinstance(value, str):
        return encode_basestring(value)  # what json.dumps(value, ensure_ascii=False) writes
    if isinstance(value, dict):
        items = sorted((str(k), v) for k, v in value.items())
        return "{" + ",".join([f"{encode_basestring(k)}:{_dump(v)}" for k, v in items]) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join([_dump(v) for v in value]) + "]"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _number(value)
    raise TypeError(f"cannot sign a {type(value).__name__}")


def _number(value: int | float) -> str:
    """A JSON number as digits and exponent with trailing zeros moved into the exponent.

    A JSON column may hand a number back spelt differently: PostgreSQL's jsonb keeps
    numbers as decimals, so 1e20 comes back as the int 100000000000000000000, 100.0 as
    100.0 but 1.5e300 as a 301-digit int, and -0.0 as 0. The decimal value is what
    survives, so that is what is signed (exactly: no rounding to a precision).
    """
    if isinstance(value, int):  # the same digits and exponent, without a Decimal
        sign, text, exponent = value < 0, str(abs(value)), 0
    else:
        number = Decimal(repr(value))
        if not number.is_finite():  # never stored (meta refuses NaN/Infinity); never crash
            return json.dumps(value)
        sign, digits, exponent = number.as_tuple()
        text = "".join(map(str, digits))
    stripped = text.rstrip("0")
    if not stripped:
        return "0"
    exponent += len(text) - len(stripped)
    return f"{'-' if sign else ''}{stripped}e{exponent}"


# ---------------------------------------------------------------- signing and checking


def _key() -> bytes:
    if not settings.SALON_SECRET:
        # salon.store makes the secret before a process reads its settings; an empty key
        # would sign every entry with nothing.
        raise ImproperlyConfigured(
            "the store's secret is missing: run any `salon` command once to create the "
            "store (or set AGENT_SALON_SECRET)"
        )
    return settings.SALON_SECRET.encode()


def _mac(canonical: bytes) -> bytes:
    return hmac.new(_key(), canonical, hashlib.sha256).digest()


def sign_fields(fields: dict) -> str:
    """The signature of a new entry (version 2)."""
    mac = base64.urlsafe_b64encode(_mac(canonical_v2(fields))).rstrip(b"=")
    return V2_PREFIX + mac.decode("ascii")


def signature_v1(fields: dict) -> str:
    return _mac(canonical_v1(fields)).hex()


def verdict_of(signature: str, fields: dict) -> str:
    """VALID (a version-2 signature matches), OLD (a version-1 signature matches: the
    fields it did not cover are unchecked) or TAMPERED."""
    signature = signature if isinstance(signature, str) else ""
    try:
        if signature.startswith(V2_PREFIX):
            return VALID if hmac.compare_digest(signature, sign_fields(fields)) else TAMPERED
        return OLD if hmac.compare_digest(signature, signature_v1(fields)) else TAMPERED
    except Exception:  # a field no bus write could produce: the row was changed outside it
        return TAMPERED


def entry_fields(entry) -> dict:
    """The stored fields of an entry (a bus.models.Entry with its room loaded)."""
    return {
        "id": entry.id,
        "room": entry.room.name,
        "seq": entry.seq,
        "ts": entry.ts,
        "sender": entry.sender,
        "sender_agent": entry.sender_agent,
        "type": entry.type,
        "to": entry.to,
        "re": entry.re,
        "content": entry.content,
        "meta": entry.meta,
        "via": entry.via,
        "sender_addr": entry.sender_addr,
        "sender_session": entry.sender_session,
    }


def sign_entry(entry) -> str:
    return sign_fields(entry_fields(entry))


def verdict(entry) -> str:
    return verdict_of(entry.signature, entry_fields(entry))


def verify_entry(entry) -> bool:
    """Does the row read as the bus stored it? (Never raises.)"""
    return verdict(entry) != TAMPERED


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
