"""Reading: clipping, ordering, bounded counts and where a first read starts."""

from __future__ import annotations

import heapq
from collections import namedtuple
from collections.abc import Iterable, Iterator, Sequence

# Breaks clip() may cut at, and how many of their characters the kept part keeps.
_SENTENCE_BREAKS = (". ", "! ", "? ", ".\n")


_CLIP_MIN_SHARE = 0.6


_CLIP_TAIL = "… +{n} characters — history for the whole entry"


def _last_break(text: str, limit: int) -> int:
    """Length of the longest prefix (≤ limit) ending at a paragraph or sentence break."""
    best = 0
    # A paragraph break is cut before the blank line, so it may start at `limit`.
    para = text.rfind("\n\n", 0, limit + 2)
    if para >= 0:
        best = para
    for mark in _SENTENCE_BREAKS:
        # Keep the punctuation; the whitespace after it may fall just past the limit.
        at = text.rfind(mark, 0, limit + 1)
        if at >= 0:
            best = max(best, at + 1)
    return best


class Clip(namedtuple("Clip", "text full held_back", defaults=(None, 0))):
    """What inbox hands out of an entry: ``text``, and when it was cut, the full length
    (int, else None) and how many characters were held back."""

    __slots__ = ()


def clip(text: str, limit: int) -> Clip:
    """Inbox clipping: the text whole when it fits, else cut at a break, with a tail."""
    if limit <= 0 or len(text) <= limit:
        return Clip(text)
    cut = _last_break(text, limit)
    if cut <= _CLIP_MIN_SHARE * limit:
        # The only break is too early: a hard cut shows more of the entry.
        cut = limit
    held_back = len(text) - cut
    return Clip(f"{text[:cut]} {_CLIP_TAIL.format(n=held_back)}", len(text), held_back)


def oldest_first(per_room: Iterable[Iterable]) -> Iterator:
    """The entries of several rooms (each room's in seq order) as one run, oldest
    first, and entries of one millisecond in the order they were written: by ``ts``, then
    by ``id`` (a UUIDv7, counting up within a process's millisecond). Each room's own
    entries keep the order given (a merge never reorders one of its inputs), so a prefix
    of the run is a prefix of every room's: a cursor moved over it skips nothing."""
    return heapq.merge(*per_room, key=lambda entry: (entry.ts, entry.id))


def bounded(count: int, capped: bool) -> str:
    """A count as shown: `1000+` when counting stopped at a cap (it is a lower bound)."""
    return f"{count}+" if capped else str(count)


def first_cursor(
    sibling_cursors: Sequence[int], recent_sibling_seqs: Sequence[int]
) -> tuple[int, int | None]:
    """A new seat's first cursor in a room, and where the entries it holds unread start.

    It inherits the furthest cursor of the agent's other seats: what a sibling read is
    read. Only the entries its sibling seats wrote in the last SIBLING_WINDOW stay unread:
    those at or below that cursor are held, from just before the oldest of them (the
    entries by sibling seats in (held_from, cursor] are unread; Membership.held_from).
    With no earlier seat of the agent, nothing is read: (0, None).
    """
    if not sibling_cursors:
        return 0, None
    furthest = max(sibling_cursors)
    read_recent = [seq for seq in recent_sibling_seqs if seq <= furthest]
    return furthest, (min(read_recent) - 1 if read_recent else None)
