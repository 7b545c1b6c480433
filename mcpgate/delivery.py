"""Records which seats' streams got each push (Entry.delivered_to / delivery_errors).

The ledger already guarantees at-most-once; these fields are the staff's view of where
an entry went. Writing them once per push would serialize a broadcast's fan-out on the
entry row, so pushes are collected in memory and written in one transaction a moment
later (at most FLUSH_SECONDS behind).
"""

from __future__ import annotations

import asyncio
import logging

from channels.db import database_sync_to_async

from bus import services

log = logging.getLogger("salon.mcp")

FLUSH_SECONDS = 0.2

_delivered: dict[str, list[str]] = {}
_failed: dict[str, list[str]] = {}
_flusher: asyncio.Task | None = None


def record(entry_id: str, seat: str, *, ok: bool) -> None:
    global _flusher
    (_delivered if ok else _failed).setdefault(entry_id, []).append(seat)
    if _flusher is None or _flusher.done():
        _flusher = asyncio.ensure_future(_flush_soon())


async def _flush_soon() -> None:
    await asyncio.sleep(FLUSH_SECONDS)
    await flush()


async def flush() -> None:
    global _delivered, _failed
    delivered, failed = _delivered, _failed
    _delivered, _failed = {}, {}
    if not (delivered or failed):
        return
    try:
        await database_sync_to_async(services.record_deliveries)(delivered=delivered, failed=failed)
    except Exception:  # the pushes happened; only the record of them is lost
        log.exception("could not record deliveries for %d entries", len(delivered) + len(failed))
