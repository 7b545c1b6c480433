"""Search: every entry a store holds, found by its words, most relevant first.

The index is the store's own (migration 0017_entry_search): FTS5 on SQLite, a generated
tsvector column on PostgreSQL; it covers every entry, written here or landed by the
relay, since the store writes it with the row. The query language and its rendering for
each store are bus.rules.search; this module asks the store and shapes the answer.

`search()` is the entry point of every face: `salon search`, the MCP tool `search`, the
admin's text box (through `matching`) and `salon top`. It reads only: no cursor moves,
nothing is marked read or told.

Ranking: relevance (FTS5's bm25; PostgreSQL's ts_rank), then newest first. The ranked
set is the newest RANKED_MATCHES matches (in the seat's rooms, after the filters), so a
word found in half of a million entries costs a bounded sort; a narrower query (more
words, a room, --from, --since) reaches further back.
"""

from __future__ import annotations

from datetime import datetime

from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone

from bus import rules, signing, wire
from bus.models import Entry, Room, Seat
from bus.rules import RuleError
from bus.services import rooms

DEFAULT_LIMIT = 20
MAX_LIMIT = 200
RANKED_MATCHES = 1000


def search(
    seat: Seat | None,
    query: str,
    *,
    room: str | None = None,
    limit: int = DEFAULT_LIMIT,
    sender: str | None = None,
    type: str | None = None,
    since: str | None = None,
) -> dict:
    """Search the entries `seat` may read for `query` (the search language).

    seat: the reader; it finds the entries of the rooms it is a member of (`room`, if
    named, must be one of them). None is staff: every room, archived ones too.
    room / sender (a seat or agent name) / type / since (a duration: `7d`, `90m`): filters.
    limit: at most this many results (1 to 200).

    Returns ``{"query", "rooms", "results", "notes", "tampered"}``: ``query`` as it was
    understood, ``rooms`` searched (None for staff: all), ``notes`` on what was left out
    of the query, and ``results``, most relevant first, each ``{"id", "room", "seq",
    "ts", "from", "type", "to", "score", "snippet", "highlights", "tampered"}`` —
    ``snippet`` is one line of plain text around the first hit and ``highlights`` the
    [start, end) offsets of the query's words in it. Never raises on the query text;
    raises RuleError on a bad filter (a room the seat is not in, a bad name or
    duration).
    """
    if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise RuleError(f"limit must be a whole number from 1 to {MAX_LIMIT}")
    parsed = rules.parse_query(query)
    where, params, searched = _filters(seat, room, sender, type, since)
    answer = {"query": parsed.shown(), "rooms": searched, "results": [], "notes": []}
    answer["notes"] = list(parsed.notes)
    if parsed.searchable and (searched is None or searched):
        ranked = _ranked(parsed, where, params, limit)
        answer["results"] = _results(parsed, ranked, seat)
    answer["tampered"] = sum(1 for r in answer["results"] if r["tampered"])
    return answer


def matching(queryset: QuerySet, query: str) -> QuerySet:
    """`queryset` (of Entry) narrowed to the entries `query` finds, in the queryset's own
    order: the admin's text box. A query with nothing to look for finds nothing."""
    parsed = rules.parse_query(query)
    if not parsed.searchable:
        return queryset.none()
    if connection.vendor == "postgresql":
        clause = "bus_entry.search @@ to_tsquery('simple', %s)"
        param = rules.tsquery_text(parsed)
    else:
        clause = "bus_entry.rowid IN (SELECT rowid FROM entry_search WHERE entry_search MATCH %s)"
        param = rules.fts5_match(parsed)
    return queryset.extra(where=[clause], params=[param])


def rebuild_index() -> None:
    """Index every entry again (SQLite; the PostgreSQL column is written with its row)."""
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO entry_search(entry_search) VALUES ('rebuild')")


# ---------------------------------------------------------------- asking the store


def _filters(seat, room, sender, type_, since) -> tuple[list[str], list, list[str] | None]:
    """SQL conditions on bus_entry `e` for who may read and the filters, their params,
    and the room names searched (None: every room)."""
    where: list[str] = []
    params: list = []
    searched: list[str] | None = None
    if seat is not None:
        readable = rooms.rooms_for_read(seat, room)
        searched = [r.name for r in readable]
        where.append(f"e.room_id IN ({', '.join(['%s'] * len(readable))})")
        params += [r.pk for r in readable]
    elif room:
        found = Room.objects.filter(name=rules.validate_name(room, "room")).first()
        if found is None:
            raise rooms.unknown_room(room)
        searched = [found.name]
        where.append("e.room_id = %s")
        params.append(found.pk)
    if sender:
        sender = rules.validate_name(sender, "sender")
        # One column, as the admin's source filter: a seat name holds `#`, an agent's never.
        where.append("e.sender = %s" if "#" in sender else "e.sender_agent = %s")
        params.append(sender)
    if type_:
        where.append("e.type = %s")
        params.append(rules.normalize_type(type_))
    if since:
        start: datetime = timezone.now() - rules.parse_duration(since)
        where.append("e.ts >= %s")
        params.append(start)
    return where, params, searched


def _ranked(parsed: rules.Query, where: list[str], params: list, limit: int) -> list[tuple]:
    """(entry id, score) of the best `limit` matches, best first."""
    conditions = "".join(f" AND {w}" for w in where)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "WITH q AS (SELECT to_tsquery('simple', %s) AS q), "
                "newest AS (SELECT e.id, e.ts, e.search FROM bus_entry e, q "
                f"WHERE e.search @@ q.q{conditions} ORDER BY e.ts DESC LIMIT %s) "
                "SELECT newest.id, ts_rank(newest.search, q.q) AS score FROM newest, q "
                "ORDER BY score DESC, newest.ts DESC, newest.id DESC LIMIT %s",
                [rules.tsquery_text(parsed), *params, RANKED_MATCHES, limit],
            )
            return [(row[0], float(row[1])) for row in cursor.fetchall()]
        match = rules.fts5_match(parsed)
        # The FTS table drives (CROSS JOIN keeps it outside), newest rowid first, so the
        # cut-off is found after RANKED_MATCHES matches whatever their number.
        matches = (
            "FROM entry_search CROSS JOIN bus_entry e ON e.rowid = entry_search.rowid "
            f"WHERE entry_search MATCH %s{conditions}"
        )
        cursor.execute(
            f"SELECT entry_search.rowid {matches} ORDER BY entry_search.rowid DESC "
            "LIMIT 1 OFFSET %s",
            [match, *params, RANKED_MATCHES - 1],
        )
        row = cursor.fetchone()
        floor, floor_params = (
            ("", []) if row is None else (" AND entry_search.rowid >= %s", [row[0]])
        )
        cursor.execute(
            f"SELECT e.id, bm25(entry_search) AS score {matches}{floor} "
            "ORDER BY score, e.ts DESC, e.id DESC LIMIT %s",
            [match, *params, *floor_params, limit],
        )
        return [(row[0], -float(row[1])) for row in cursor.fetchall()]


def _results(parsed: rules.Query, ranked: list[tuple], seat: Seat | None) -> list[dict]:
    if not ranked:
        return []
    rows = {
        row.pk: row
        for row in Entry.objects.filter(pk__in=[pk for pk, _ in ranked]).select_related("room")
    }
    to_uuid = Entry._meta.pk.to_python
    results = []
    for pk, score in ranked:
        row = rows.get(to_uuid(pk))
        if row is None:
            continue
        content = row.content if isinstance(row.content, str) else ""
        text, highlights = rules.snippet(content, parsed)
        results.append(
            {
                "id": str(row.pk),
                "room": row.room.name,
                "seq": row.seq,
                "ts": wire.iso(row.ts),
                "from": row.sender,
                "type": row.type,
                "to": rules.names_in(row.to),
                "score": float(f"{score:.4g}"),
                "snippet": text,
                "highlights": highlights,
                "tampered": not signing.verify_entry(row),
            }
        )
    return results
