"""UUID v7 ids (RFC 9562): time-sortable, and monotonic within one process.

Python 3.11 has no uuid7. Within one millisecond the 12-bit rand_a field is used as a
counter, so two entries created in the same millisecond by one process keep their order.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

_lock = threading.Lock()
_last_ms = 0
_counter = 0


def uuid7(now_ms: int | None = None) -> uuid.UUID:
    global _last_ms, _counter
    with _lock:
        ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        if ms <= _last_ms:
            # Same (or earlier, if the clock stepped back) millisecond: count up.
            ms = _last_ms
            _counter += 1
            if _counter > 0xFFF:
                ms += 1
                _counter = 0
        else:
            _counter = 0
        _last_ms = ms
        counter = _counter
    rand_b = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= counter << 64
    value |= 0b10 << 62
    value |= rand_b
    return uuid.UUID(int=value)


def uuid7_ms(value: uuid.UUID) -> int:
    return value.int >> 80
