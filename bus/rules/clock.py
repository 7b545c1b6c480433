"""Time: durations, liveness and stale focus."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from bus.rules.errors import RuleError, _show
from bus.rules.limits import GONE, LIVE, LIVE_WINDOW, STALE_FOCUS, UNKNOWN, UNKNOWN_WINDOW

_DURATION_RE = re.compile(r"([0-9]+)([smhdw])")


_DURATION_UNITS = {
    "s": timedelta(seconds=1),
    "m": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "d": timedelta(days=1),
    "w": timedelta(weeks=1),
}


def parse_duration(text: str) -> timedelta:
    """``30s``, ``90m``, ``2h``, ``1d``, ``1w``: a positive whole number and one unit."""
    match = _DURATION_RE.fullmatch(text.strip().lower()) if isinstance(text, str) else None
    hint = "use a positive whole number and a unit s, m, h, d or w, e.g. 90m, 2h, 1d"
    if match is None or int(match.group(1)) == 0:
        raise RuleError(f"duration {_show(text)} is not understood: {hint}")
    try:
        return int(match.group(1)) * _DURATION_UNITS[match.group(2)]
    except OverflowError:
        raise RuleError(f"duration {_show(text)} is too long: {hint}") from None


def liveness(
    last_seen: datetime | None,
    stream_open: bool,
    now: datetime,
    signed_off: datetime | None = None,
) -> str:
    """Liveness: ``live`` (stream open or seen in the last 2 min), ``unknown`` (< 30 min), ``gone``.

    ``signed_off``: the session said goodbye (an MCP DELETE) at that time; the seat is gone
    until a newer sign of life.
    """
    if stream_open:
        return LIVE
    if last_seen is None or (signed_off is not None and signed_off >= last_seen):
        return GONE
    age = now - last_seen
    if age <= LIVE_WINDOW:
        return LIVE
    if age < UNKNOWN_WINDOW:
        return UNKNOWN
    return GONE


def focus_is_stale(focus_ts: datetime | None, now: datetime) -> bool:
    """A focus older than 4 hours is reported stale (never dropped); no focus is not stale."""
    return focus_ts is not None and now - focus_ts > STALE_FOCUS
