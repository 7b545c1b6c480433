"""Telling: the per-seat ledger's claims (WakeDecision).

An entry is *told* to a seat once, by the first path that surely reaches the model: the
wait tool's result, a `salon wait` line (Claude Code's Monitor), a Stop-hook block, the
SessionStart context, or an inbox or peek that returns it (WakeDecision.told_at /
told_by). No path repeats what another told. A push to a live stream is a hint, not a
telling — Claude Code drops it unless channels are on for the user — so it never counts,
and a later telling of a pushed entry says so (`pushedAt`).

Every claim is a conditional UPDATE … WHERE <column> IS NULL, so two claimers (two
hooks, two waits, two workers) never both get a row, and none of them moves a cursor.
While a seat is quiet nothing is told to it unasked: the entries stay untold until the
quiet is over (an inbox read still tells what it returns).
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from bus import ledger, rules, signing, wire
from bus.models import Entry, Seat, WakeDecision
from bus.services import recording, rooms
from patches.django import CompiledLookup

# ---------------------------------------------------------------- telling


def halves() -> tuple[bool, bool]:
    """(letterbox on, safety net on): each needs the command and its own switch."""
    configured = bool(settings.TRIAGE_CMD)
    return configured and settings.TRIAGE_LETTERBOX, configured and settings.TRIAGE_NET


def awaits_letterbox(judged_by: str, entry: Entry, seat_name: str) -> bool:
    """Whether a woken row (its `judge`, its entry, its seat's name) waits for the
    letterbox's judgement before anything may tell it: the letterbox is on, nobody has
    judged the row, the entry does not name exactly this seat, and its signature holds (a
    tampered entry is not put in front of a model: it is told, flagged)."""
    return (
        halves()[0]
        and not judged_by
        and rules.letterbox_judges(rules.names_in(entry.to), seat_name)
        and signing.verify_entry(entry)
    )


def untold_rows(seat: Seat, room_names: Sequence[str] | None, limit: int) -> list[WakeDecision]:
    """This seat's untold rows (bus.ledger.UNTOLD), in `room_names` if given, oldest first."""
    sql, params = ledger.UNTOLD, [seat.pk]
    if room_names:
        ids = [rooms.get_room(name).pk for name in room_names]
        sql += f" AND w.room_id IN ({', '.join(['%s'] * len(ids))})"
        params += ids
    sql += " ORDER BY w.decided_at, w.seq LIMIT %s"
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, limit])
        ids = [row[0] for row in cursor.fetchall()]
    found = WakeDecision.objects.in_bulk(ids)
    return [found[pk] for pk in ids if pk in found]


def tell(
    *, seat: Seat, by: str, room_names: Sequence[str] | None = None, limit: int = 100
) -> list[dict]:
    """Tell this seat its untold entries, oldest first, each once, by `by` (one of
    WakeDecision.TELLERS): the entries, as the seat reads them, each with `pushedAt` when
    it was pushed before (the telling says so). A row the letterbox is still to judge
    (awaits_letterbox) is not told: the caller judges first, and an
    entry stored since waits for its next look."""
    assert by in WakeDecision.TELLERS, by
    at = timezone.now()
    rows = untold_rows(seat, room_names, limit)
    entries = Entry.objects.select_related("room").in_bulk([row.entry_id for row in rows])
    rows = [
        row
        for row in rows
        # One stored after this look's judge claimed its rows waits for the next look.
        if not awaits_letterbox(row.judge, entries[row.entry_id], seat.name)
        and WakeDecision.objects.filter(pk=row.pk).tell(at, by)
    ]
    told = []
    for row in rows:
        data = wire.entry(entries[row.entry_id], reader=seat, woken=True)
        data["pushedAt"] = wire.iso(row.pushed_at)
        told.append(data)
    return told


def anything_untold(*, seat: Seat) -> bool:
    """Whether this seat has any untold entry left (after a telling of at most `limit`)."""
    return bool(untold_rows(seat, None, 1))


def mark_read_as_told(*, seat: Seat, entry_ids: Sequence) -> None:
    """An inbox or peek returned these entries: each waking one is told (if untold)."""
    WakeDecision.objects.filter(seat=seat, entry_id__in=list(entry_ids)).tell(
        timezone.now(), "inbox"
    )


def _quiet_now(seat: Seat) -> bool:
    seat.refresh_from_db(fields=["quiet", "quiet_until"])
    return seat.is_quiet(timezone.now())


def collect_wakes(*, seat: Seat, room: str | None = None, limit: int = 20) -> dict:
    """The wait tool: the waking, unread entries not yet told to this seat — pushed or
    not — oldest first, told now. The model asked: a quiet does not hold them back."""
    entries = tell(seat=seat, by="wait", room_names=[room] if room else None, limit=limit)
    return {"seat": seat.name, "entries": entries, "tampered": wire.tampered_count(entries)}


def announce_wakes(
    *, seat: Seat, rooms: Sequence[str] | None = None, limit: int = 20
) -> list[dict]:
    """`salon wait` (the Monitor): the untold entries (in `rooms`, if given), told now."""
    if _quiet_now(seat):
        return []
    return tell(seat=seat, by="monitor", room_names=rooms, limit=limit)


def claim_nudges(*, seat: Seat, limit: int = 100) -> list[dict]:
    """Stop hook: the untold entries, told now by holding the turn. The cursor does not
    move: the entries stay unread."""
    at = timezone.now()
    # A Stop hook runs for this seat: it can hold a turn (the stats' "listener" = hook).
    recording.quietly(lambda: Seat.objects.filter(pk=seat.pk).update(hook_seen_at=at))
    if _quiet_now(seat):
        return []
    return tell(seat=seat, by="stop", limit=limit)


def tell_at_prompt(*, seat: Seat, limit: int = 100) -> list[dict]:
    """UserPromptSubmit: the untold entries, told now by the context the prompt is sent
    with. The cursor does not move: the entries stay unread."""
    if _quiet_now(seat):
        return []
    return tell(seat=seat, by="prompt", limit=limit)


def tell_at_start(*, seat: Seat, limit: int = 100) -> list[dict]:
    """SessionStart: the untold entries, told now by the context the session starts with."""
    if _quiet_now(seat):
        return []
    return tell(seat=seat, by="start", limit=limit)


# ---------------------------------------------------------------- pushing


def claim_pushes(*, seat: Seat, limit: int = 100) -> tuple[list[tuple[int, Entry]], int]:
    """Claim waking, unread entries never pushed nor told to this seat, oldest first.

    Returns ([(push_seq, entry)], how many more are waiting beyond `limit`). The push_seq
    is the SSE event id: per seat, increasing in the order the pushes were claimed.
    """
    return claim_pushes_of_seats(limits={seat.pk: limit}).get(seat.pk, ([], 0))


# Seats claimed in one transaction: bounds the statement's parameters (SQLite) and how
# long one claim holds the write lock.
CLAIM_CHUNK = 500


def claim_pushes_of_seats(
    *, limits: dict[int, int]
) -> dict[int, tuple[list[tuple[int, Entry]], int]]:
    """claim_pushes for many seats at once: {seat id: limit} → {seat id: (claimed, more)}.

    A broadcast rings every woken seat at the same moment; claiming them one by one cost a
    transaction (and an fsync) per seat, 2.3-3.5 s for 500 streams (bench/RESULTS.md §5).
    Here every CLAIM_CHUNK seats take one transaction with set-based statements: one
    read of their pending ledger rows, one of their push counters, and two executemany
    UPDATEs. Seats with nothing to claim are absent from the result.

    Once only, across workers and restarts: the seats' rows are locked first (FOR UPDATE
    on PostgreSQL; on SQLite the IMMEDIATE transaction holds the write lock), so claims of
    one seat are serialized and the rows read after the lock are the truth. Each UPDATE
    still requires push_seq IS NULL, and if any of them matched nothing (which only a
    claimer that does not lock the seat could cause) the whole claim is rolled back: a
    push may be delayed to the next ring, never duplicated.
    """
    claimed: dict[int, tuple[list[tuple[int, Entry]], int]] = {}
    seat_ids = sorted(limits)
    for start in range(0, len(seat_ids), CLAIM_CHUNK):
        chunk = {pk: limits[pk] for pk in seat_ids[start : start + CLAIM_CHUNK]}
        claimed.update(_claim_chunk(chunk))
    return claimed


# The rows to push (bus.ledger.pending), per seat the oldest `limit` (rank), with the
# seat's total (waiting).
_PENDING_OLDEST = """
    SELECT id, seat_id, entry_id, rank, waiting, judge FROM (
        SELECT w.id, w.seat_id, w.entry_id, w.judge,
               ROW_NUMBER() OVER (
                   PARTITION BY w.seat_id ORDER BY w.decided_at, w.seq, w.id
               ) AS rank,
               COUNT(*) OVER (PARTITION BY w.seat_id) AS waiting
        {pending}
    ) oldest
    WHERE rank <= %s
    ORDER BY seat_id, rank
"""


def _pending_sql(template: str, seat_ids) -> str:
    seats = ", ".join(["%s"] * len(seat_ids))
    return template.format(pending=ledger.rows_of(f"IN ({seats})", only_pending=True))


def _anything_pending(seat_ids: list[int]) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(_pending_sql("SELECT 1 {pending} LIMIT 1", seat_ids), seat_ids)
        return cursor.fetchone() is not None


def _oldest_pending(limits: dict[int, int]) -> list[tuple[int, int, UUID, int, int, str]]:
    """[(row id, seat id, entry id, rank, waiting, judge)] for the seats, by seat then age."""
    seat_ids = sorted(limits)
    with connection.cursor() as cursor:
        cursor.execute(_pending_sql(_PENDING_OLDEST, seat_ids), [*seat_ids, max(limits.values())])
        return cursor.fetchall()


def _claim_chunk(limits: dict[int, int]) -> dict[int, tuple[list[tuple[int, Entry]], int]]:
    # Look before locking: every keep-alive and every ring asks, and on SQLite a write
    # transaction with nothing to claim would still take the database's write lock.
    if not _anything_pending(sorted(limits)):
        return {}
    at = connection.ops.adapt_datetimefield_value(timezone.now())  # as the ORM would store it
    claimed: dict[int, tuple[list[tuple[int, Entry]], int]] = {}
    with transaction.atomic():
        locked = _lock_push_counters(sorted(limits))
        counters = {pk: counter for pk, (counter, _) in locked.items()}
        rows = [row for row in _oldest_pending(limits) if row[3] <= limits[row[1]]]
        # A broadcast's rows all name one entry: each entry is read (and later rendered)
        # once, however many seats it goes to.
        entries = {entry.pk: entry for entry in _ENTRIES.fetch(row[2] for row in rows)}
        row_updates, counter_updates = [], {}
        for row_id, seat_id, entry_id, _, waiting, judged_by in rows:
            if seat_id not in counters:
                continue
            # Stored after this ring's judge claimed its rows: pushed once judged (its
            # own ring judges it first).
            if awaits_letterbox(judged_by, entries[_uuid(entry_id)], locked[seat_id][1]):
                continue
            counters[seat_id] += 1
            row_updates.append((counters[seat_id], at, row_id))
            counter_updates[seat_id] = counters[seat_id]
            pushes, _ = claimed.get(seat_id, ([], 0))
            pushes.append((counters[seat_id], entries[_uuid(entry_id)]))
            claimed[seat_id] = (pushes, max(0, waiting - limits[seat_id]))
        if not row_updates:
            return {}
        with connection.cursor() as cursor:
            cursor.executemany(
                f"UPDATE {WakeDecision._meta.db_table} SET push_seq = %s, pushed_at = %s "
                "WHERE id = %s AND push_seq IS NULL",
                row_updates,
            )
            if cursor.rowcount != len(row_updates):
                raise ClaimConflict(
                    f"{len(row_updates) - cursor.rowcount} of {len(row_updates)} pushes were "
                    "claimed by someone else; nothing claimed, the next ring retries"
                )
            cursor.executemany(
                f"UPDATE {Seat._meta.db_table} SET push_counter = %s WHERE id = %s",
                [(value, pk) for pk, value in counter_updates.items()],
            )
        # Claimed is handed to the stream: recorded as delivered in the same commit.
        delivered: dict[str, list[str]] = {}
        for seat_id, (pushes, _) in claimed.items():
            for _, entry in pushes:
                delivered.setdefault(str(entry.pk), []).append(locked[seat_id][1])
        record_deliveries(delivered=delivered, failed={})
    return claimed


# The entries a claim pushes, with their room: compiled once (patches.django).
_ENTRIES = CompiledLookup(Entry, "id", "room")


def _lock_push_counters(seat_ids: list[int]) -> dict[int, tuple[int, str]]:
    """{seat id: (push_counter, name)}, the seats' rows locked (FOR UPDATE where the
    database has it; SQLite's IMMEDIATE transaction holds the write lock) in one order for
    every claimer (by id): no deadlock. Written out: every claim runs it."""
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, push_counter, name FROM {Seat._meta.db_table} "
            f"WHERE id IN ({', '.join(['%s'] * len(seat_ids))}) ORDER BY id{lock}",
            seat_ids,
        )
        return {pk: (counter, name) for pk, counter, name in cursor.fetchall()}


# A push claimed inside the send (bus.bell.Pusher): the seats' counters moved in one
# statement, for each seat with nothing older still to push (an older entry goes first,
# through the claimer, and this one after it).
_CLAIM_AT_SEND = """
    UPDATE {seat} SET push_counter = push_counter + 1
    WHERE id IN ({seats}) AND NOT EXISTS (SELECT 1 {pending})
    RETURNING id, push_counter
"""


def claim_at_send(seat_ids: Sequence[int], *, lock_also: int | None = None) -> dict[int, int]:
    """{seat id: push_seq} for the pushes of a new entry to these seats, claimed inside the
    sending transaction, before its ledger rows are written (the caller writes them with
    these push_seqs). A seat with an older push still to claim is left out.

    On PostgreSQL the seats' rows are locked in id order first, the sender's too
    (`lock_also`, whose row the send updates), as every claimer locks them: no deadlock.
    A database without UPDATE … RETURNING (SQLite before 3.35) claims nothing here."""
    if not seat_ids or not connection.features.can_return_columns_from_insert:
        return {}
    ids = sorted(seat_ids)
    if connection.features.has_select_for_update:
        _lock_push_counters(sorted({*ids, lock_also} - {None}))
    claimed: dict[int, int] = {}
    for start in range(0, len(ids), CLAIM_CHUNK):
        chunk = ids[start : start + CLAIM_CHUNK]
        seat = Seat._meta.db_table
        sql = _CLAIM_AT_SEND.format(
            seat=seat,
            seats=", ".join(["%s"] * len(chunk)),
            pending=ledger.rows_of(f"= {seat}.id", only_pending=True),
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, chunk)
            claimed.update(cursor.fetchall())
    return claimed


def _uuid(value) -> UUID:
    """An entry id as a raw cursor returns it: a UUID (PostgreSQL) or 32 hex digits."""
    return value if isinstance(value, UUID) else UUID(value)


class ClaimConflict(RuntimeError):
    """A row to push was claimed by a claimer that did not lock its seat (rolled back)."""


def replay_pushes(*, seat: Seat, after: int) -> list[tuple[int, Entry]]:
    """Pushes to this seat after SSE event id `after`, in order (Last-Event-ID resume)."""
    rows = (
        WakeDecision.objects.filter(seat=seat, push_seq__gt=after)
        .select_related("entry__room")
        .order_by("push_seq")
    )
    return [(row.push_seq, row.entry) for row in rows]


def record_deliveries(*, delivered: dict[str, list[str]], failed: dict[str, list[str]]) -> None:
    """Add seat names to entries' delivered_to / delivery_errors (entry id → seats); a
    seat whose push failed leaves delivered_to (its claim recorded it as delivered).

    One read of every entry's two lists (locked: FOR UPDATE on PostgreSQL, the write lock
    on SQLite), then one UPDATE of the two columns per entry; no model instances."""
    ids = sorted(set(delivered) | set(failed))
    if not ids:
        return
    table, pk = Entry._meta.db_table, Entry._meta.pk
    delivered_field = Entry._meta.get_field("delivered_to")
    errors_field = Entry._meta.get_field("delivery_errors")
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, delivered_to, delivery_errors FROM {table} "
            f"WHERE id IN ({', '.join(['%s'] * len(ids))}){lock}",
            [pk.get_db_prep_value(UUID(i), connection) for i in ids],
        )
        updates = []
        for raw_id, raw_delivered, raw_errors in cursor.fetchall():
            entry_id = str(_uuid(raw_id))
            # As the ORM reads them (StoredJSONField); names_in: a row changed outside the
            # bus may hold anything there.
            now_delivered = delivered_field.from_db_value(raw_delivered, None, connection)
            now_errors = errors_field.from_db_value(raw_errors, None, connection)
            now_errors = set(rules.names_in(now_errors)) | set(failed.get(entry_id, []))
            now_delivered = set(rules.names_in(now_delivered)) | set(delivered.get(entry_id, []))
            now_delivered -= set(failed.get(entry_id, []))
            updates.append(
                (
                    delivered_field.get_db_prep_save(sorted(now_delivered), connection),
                    errors_field.get_db_prep_save(sorted(now_errors), connection),
                    raw_id,
                )
            )
        cursor.executemany(
            f"UPDATE {table} SET delivered_to = %s, delivery_errors = %s WHERE id = %s", updates
        )
