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
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _key() -> bytes:
    return settings.SALON_SECRET.encode()


def sign(**fields) -> str:
    return hmac.new(_key(), canonical(**fields), hashlib.sha256).hexdigest()


def verify(signature: str, **fields) -> bool:
    return hmac.compare_digest(signature or "", sign(**fields))


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
