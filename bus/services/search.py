"""Search: every entry a store holds, found by its words, most relevant first.

The index is the store's own (migration 0017_entry_search): FTS5 on SQLite, a generated
tsvector column on PostgreSQL (and since 0019_entry_search_pairs a second one of each
pair of adjacent words, so a phrase is looked up by its pairs); it covers every
entry, written here or landed by the relay, since the store writes it with the row. The
query language and its rendering for each store are bus.rules.search; this module asks
the store and shapes the answer.

`search()` is the entry point of every face: `salon search`, the MCP tool `search`, the
admin's text box (through `matching`) and `salon top`. It reads only: no cursor moves,
nothing is marked read or told.

Ranking: relevance, then newest first. The ranked set is the newest RANKED_MATCHES
matches (in the seat's rooms, after the filters), so a word found in half of a million
entries costs what a rare one does; a narrower query (more words, a room, --from,
--since) reaches further back. Relevance is, on SQLite, BM25's term-frequency part over
the hits FTS5 finds in each candidate (rules.relevance: no document frequencies, which
FTS5's bm25() gathers by reading each word's whole list of entries: 1 s for a common
word at 400k entries), and on PostgreSQL ts_rank.
"""

from __future__ import annotations

from datetime import datetime

from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils import timezone

from bus import rules, signing, wire
from bus.models import Entry, Room, Seat
from bus.rules import RuleError
from bus.services import rooms

DEFAULT_LIMIT = 20
MAX_LIMIT = 200
RANKED_MATCHES = 300
DENSE_MATCHES = 5000
# PostgreSQL: the share of a store's entries from which the rooms searched are a filter
# rather than an index (_ranked).
BROAD_ROOMS = 0.1
# PostgreSQL: what the ranking query prices a page read out of order at (the server's
# default is 4, a disk's seek): a store's entries are read from memory (shared buffers or
# the page cache), where the newest-first scan a price of 4 prefers is the dearer plan for
# a pair in ~1 % of the entries: `"on in"` at a million entries read 125,291 rows newest
# first (113-126 ms) rather than its 8,453 entries through the pairs' index (10.6 ms).
RANDOM_PAGE_COST = 1.1


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
    room_ids, searched, where, params = _filters(seat, room, sender, type, since)
    answer = {"query": parsed.shown(), "rooms": searched, "results": [], "notes": []}
    answer["notes"] = list(parsed.notes)
    if parsed.searchable and (searched is None or searched):
        ranked = _ranked(parsed, room_ids, where, params, limit)
        answer["results"] = _results(parsed, ranked, seat)
    answer["tampered"] = sum(1 for r in answer["results"] if r["tampered"])
    return answer


def matching(queryset: QuerySet, query: str) -> QuerySet:
    """`queryset` (of Entry) narrowed to the entries `query` finds, in the queryset's own
    order: the admin's text box. A query with nothing to look for finds nothing.

    On SQLite the list is read newest first, so the shape of the condition follows how
    many entries match: few (under DENSE_MATCHES), their rowids from the index; many,
    each entry the newest-first scan reaches is asked of the index (a page is found
    after a few dozen). On a million entries (bench/RESULTS.md): a rare word's first
    page 1 ms where the old text scan took 2.2 s; a word in nearly every entry 20 ms,
    where reading its every match took 1.7 s of CPU."""
    parsed = rules.parse_query(query)
    if not parsed.searchable:
        return queryset.none()
    if connection.vendor == "postgresql":
        condition, params = _tsquery_condition(parsed, "bus_entry")
        return queryset.extra(where=[condition], params=params)
    match = rules.fts5_match(parsed)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM (SELECT rowid FROM entry_search WHERE entry_search MATCH %s "
            "LIMIT %s)",
            [match, DENSE_MATCHES],
        )
        dense = cursor.fetchone()[0] >= DENSE_MATCHES
    clause = (
        "EXISTS (SELECT 1 FROM entry_search WHERE entry_search MATCH %s "
        "AND entry_search.rowid = bus_entry.rowid)"
        if dense
        else "bus_entry.rowid IN (SELECT rowid FROM entry_search WHERE entry_search MATCH %s)"
    )
    return queryset.extra(where=[clause], params=[match])


def ranked(queryset: QuerySet, query: str, limit: int = MAX_LIMIT) -> dict:
    """The admin's text box: the entries of `queryset` (of Entry, with the page's other
    filters) that `query` finds, ranked as search() ranks: the best `limit` of the newest
    RANKED_MATCHES matches, by the same relevance, then newest first. The answer is
    search()'s (every room: ``rooms`` is None), with ``matches``: how many matches were
    ranked (RANKED_MATCHES when there may be more)."""
    parsed = rules.parse_query(query)
    answer = {"query": parsed.shown(), "rooms": None, "results": [], "notes": list(parsed.notes)}
    answer["matches"] = 0
    if parsed.searchable:
        newest = matching(queryset, query).order_by("-ts", "-id").values_list("pk", flat=True)
        candidates = [str(pk) for pk in newest[:RANKED_MATCHES]]
        answer["matches"] = len(candidates)
        answer["results"] = _results(parsed, _scored(parsed, candidates, limit), None)
    answer["tampered"] = sum(1 for r in answer["results"] if r["tampered"])
    return answer


def rebuild_index() -> None:
    """Index every entry again (SQLite; the PostgreSQL column is written with its row)."""
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO entry_search(entry_search) VALUES ('rebuild')")


# ---------------------------------------------------------------- asking the store


def _filters(seat, room, sender, type_, since):
    """(the ids of the rooms searched, or None for every room; their names; SQL
    conditions on bus_entry `e` for the other filters, and their params)."""
    where: list[str] = []
    params: list = []
    room_ids: list[int] | None = None
    searched: list[str] | None = None
    if seat is not None:
        readable = rooms.rooms_for_read(seat, room)
        room_ids, searched = [r.pk for r in readable], [r.name for r in readable]
    elif room:
        found = Room.objects.filter(name=rules.validate_name(room, "room")).first()
        if found is None:
            raise rooms.unknown_room(room)
        room_ids, searched = [found.pk], [found.name]
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
    return room_ids, searched, where, params


def _ranked(parsed: rules.Query, room_ids, where: list[str], params: list, limit: int):
    """(entry id, score) of the best `limit` of the newest RANKED_MATCHES matches, best
    first (ties: newest first)."""
    conditions = "".join(f" AND {w}" for w in where)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            if room_ids is not None:
                # Rooms holding a large share of the entries are a filter, not an index
                # (`IS TRUE`: no index answers it, and the planner still weighs it by
                # the column's statistics): it would list all their entries in a bitmap
                # to AND with the words' (29 ms for the 300,966 entries of 3 rooms in 8
                # at a million entries), more than reading the matches and skipping the
                # others.
                rooms_in = f"e.room_id IN ({', '.join(['%s'] * len(room_ids))})"
                if _broad(room_ids):
                    rooms_in = f"({rooms_in}) IS TRUE"
                conditions = f" AND {rooms_in}" + conditions
                params = [*room_ids, *params]
            # The tsquery is written out where it is used, not in a CTE: as a constant the
            # planner weighs it against the column's statistics (a word in most entries:
            # the newest-first index, stopped after RANKED_MATCHES; a rare one: the GIN
            # index). Behind a CTE it guessed 0.5 % for every query, and read all 958,472
            # matches of "the" at a million entries (3.5 s) to keep the newest 300.
            condition, matched = _tsquery_condition(parsed, "e")
            # A page read out of order is priced as a read in order here (see
            # RANDOM_PAGE_COST), for this query only.
            with transaction.atomic():
                cursor.execute(f"SET LOCAL random_page_cost = {RANDOM_PAGE_COST}")
                cursor.execute(
                    "SELECT newest.id, ts_rank(newest.search, to_tsquery('simple', %s)) "
                    "AS score FROM (SELECT e.id, e.ts, e.search FROM bus_entry e "
                    f"WHERE {condition}{conditions} "
                    "ORDER BY e.ts DESC LIMIT %s) newest "
                    "ORDER BY score DESC, newest.ts DESC, newest.id DESC LIMIT %s",
                    [rules.tsquery_text(parsed), *matched, *params, RANKED_MATCHES, limit],
                )
                rows = [(row[0], float(row[1])) for row in cursor.fetchall()]
                # Inside a caller's transaction, the price is the caller's again.
                cursor.execute("SET LOCAL random_page_cost TO DEFAULT")
            return rows
        # The index drives, newest first, the rooms narrowed inside it; bus_entry is read
        # for the candidates only (and, with a filter on its columns, for the matches
        # tried). Each candidate's hits are counted from FTS5's highlight().
        join = " CROSS JOIN bus_entry e ON e.rowid = entry_search.rowid" if where else ""
        cursor.execute(
            "SELECT x.id, x.ts, length(x.content), length(c.h) - length(replace(c.h, char(1), '')) "
            "FROM (SELECT entry_search.rowid AS r, "
            "highlight(entry_search, 0, char(1), char(2)) AS h "
            f"FROM entry_search{join} WHERE entry_search MATCH %s{conditions} "
            "ORDER BY entry_search.rowid DESC LIMIT %s) c "
            "CROSS JOIN bus_entry x ON x.rowid = c.r",
            [rules.fts5_match(parsed, room_ids), *params, RANKED_MATCHES],
        )
        rows = cursor.fetchall()
    return _by_relevance(rows, limit)


def _broad(room_ids: list[int]) -> bool:
    """PostgreSQL: whether these rooms hold at least BROAD_ROOMS of the store's entries
    (as their last sequence numbers count them)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(last_seq) FILTER (WHERE id = ANY(%s)), 0), "
            "coalesce(sum(last_seq), 0) FROM bus_room",
            [list(room_ids)],
        )
        theirs, every = cursor.fetchone()
    return every > 0 and float(theirs) >= BROAD_ROOMS * float(every)


def _tsquery_condition(parsed: rules.Query, table: str) -> tuple[str, list]:
    """PostgreSQL: the SQL condition (and its params) that the entries of `table` (the
    table's name or alias in the query) match `parsed`.

    A query with a phrase of words the parser keeps whole asks the pairs column for the
    phrase's word pairs (migration 0019_entry_search_pairs) and the words column for its
    other terms; both are indexed and weighed by their own statistics, so the planner
    reads the newest entries of the rooms for a pair found in many entries and the
    pairs' index for a rare one. A pair of common words ("is for") is in a few entries
    where each of its words is in most. When the pairs are not the whole query (a phrase
    of three words or more, or ending in a prefix), the whole query, order included, is
    checked on the entries found through ts_match_vq: a function call the planner does
    not send to the words' index (it would read every entry holding a common word).
    Without a pair to ask, the whole query goes to the words column."""
    full = rules.tsquery_text(parsed)
    lookup = rules.tsquery_lookup(parsed)
    if lookup is None:
        return f"{table}.search @@ to_tsquery('simple', %s)", [full]
    pairs, rest, exact = lookup
    conditions, params = [f"{table}.search_pairs @@ %s::tsquery"], [pairs]
    if rest is not None:
        conditions.append(f"{table}.search @@ to_tsquery('simple', %s)")
        params.append(rest)
    if not exact:
        conditions.append(f"ts_match_vq({table}.search, to_tsquery('simple', %s))")
        params.append(full)
    return " AND ".join(conditions), params


def _by_relevance(rows, limit: int):
    """SQLite: (entry id, score) of the best `limit` of `rows` (id, ts, length of the
    text, hits), best first, ties newest first."""
    if not rows:
        return []
    mean = sum(row[2] for row in rows) / len(rows)
    scored = [(rules.relevance(row[3], row[2], mean), str(row[1]), str(row[0])) for row in rows]
    scored.sort(reverse=True)
    return [(pk, score) for score, _, pk in scored[:limit]]


def _scored(parsed: rules.Query, candidates: list[str], limit: int):
    """(entry id, score) of the best `limit` of these entries (all matches of `parsed`),
    best first, scored as _ranked scores: ts_rank on PostgreSQL, _by_relevance on
    SQLite over the hits FTS5 finds in each."""
    if not candidates:
        return []
    ids = [
        Entry._meta.pk.get_db_prep_value(Entry._meta.pk.to_python(pk), connection)
        for pk in candidates
    ]
    marks = ", ".join(["%s"] * len(ids))
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT e.id, e.ts, ts_rank(e.search, to_tsquery('simple', %s)) "
                f"FROM bus_entry e WHERE e.id IN ({marks})",
                [rules.tsquery_text(parsed), *ids],
            )
            scored = sorted(
                ((float(score), ts, str(pk)) for pk, ts, score in cursor.fetchall()),
                reverse=True,
            )
            return [(pk, score) for score, _, pk in scored[:limit]]
        cursor.execute(
            "SELECT x.id, x.ts, length(x.content), length(c.h) - length(replace(c.h, char(1), '')) "
            "FROM (SELECT entry_search.rowid AS r, "
            "highlight(entry_search, 0, char(1), char(2)) AS h "
            "FROM entry_search WHERE entry_search MATCH %s AND entry_search.rowid IN "
            f"(SELECT rowid FROM bus_entry WHERE id IN ({marks}))) c "
            "CROSS JOIN bus_entry x ON x.rowid = c.r",
            [rules.fts5_match(parsed), *ids],
        )
        return _by_relevance(cursor.fetchall(), limit)


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
