"""What the bus cost, and whether anyone was there to be woken: `salon stats` and the
staff page /admin/stats/ read their numbers here (reads only: no cursor moves, no row
is written).

The bus does one job: being read is cheap, being woken is expensive, so a seat judged
worth waking must have had somebody listening. The numbers, per room (and per seat):

* entries stored; what inbox/peek handed out for reading (characters, entries clipped,
  characters held back by clipping);
* decisions by kind — `rule` (the wake rule at send time), `quiet` (a declared quiet suppressed
  it); a later letterbox or safety net adds its reasons to KIND_OF_REASON — and by
  reason;
* the letterbox and the safety net (bus.services.triage): entries the letterbox held back
  (`letterbox`), entries the safety net told (`net`), letterbox judgements that failed
  and so woke (`letterboxFailed`);
* wake-ups decided → told, once each, by the first way that surely reaches the model
  (announced by `salon wait` or the wait tool · a turn held by the Stop hook · listed at
  session start · returned by an inbox read), not told, and, loudly, **reached no
  session**; beside them, how many were pushed to a stream (a hint the client may drop,
  so it tells nothing on its own).

Where the numbers come from (the recording is in bus.services)
----------------------------------------------------------------
* A decision that wakes the seat, or that a quiet suppressed, is a WakeDecision row
  (the per-seat ledger the push, `salon wait` and the Stop hook already claim from),
  with `listener`: what could tell the seat when the decision was made.
* Every other decision (a broadcast FACT or ANSWER, an entry addressed to someone
  else) is counted, not stored per seat: one DecisionCount row per entry and reason.
  Measured 2026-11-30 (AMD EPYC, 2 vCPU, shared and loaded), 300 broadcast FACTs into
  a room of 200 seats, median send time and ledger storage per entry:

  ===============================  ================  ==================  =========
  non-waking decisions recorded    SQLite (WAL)      PostgreSQL 15       storage
  ===============================  ================  ==================  =========
  not at all (before the stats)    18.7 ms           32-44 ms            —
  one count row per entry+reason   19.7 ms           36-43 ms            ~0.3 kB
  one ledger row per reader        53.7 ms           75 ms               45-55 kB
  ===============================  ================  ==================  =========

  Rows per reader would have made every FACT in a big room cost 2-3 times as much, and
  200 times the storage, for numbers nobody needs per seat; the counts cost no more than
  the noise. So `--seats` shows per seat what is recorded per seat: wake-ups, quiets,
  reading.
* "Reached no session": a wake-up decided (woken) for a seat that, at decision time,
  had no listener — no open MCP stream, no running stdio server, no running `salon
  wait` (all three keep Seat.live_until ahead, so one check covers them) and no Stop
  hook (Seat.hook_seen_at: a Stop hook has run for the seat, and the seat is not gone)
  — and that was never told since. A seat whose `salon wait` is armed later, or whose
  next session starts and lists it, is told, so it does not count. A wake-up with a
  listener that was never told (still pending) counts as "not told", not as reached no
  session.
* A seat of another machine (the relay) is told by its own machine: its wake-ups are
  not counted here at all (its decisions are, as decisions).
* Reading: a counter row per (room, seat, hour) bumped by inbox/peek when they hand
  out entries (ReadCount), so a window's first hour is counted whole.
* The ledger keeps AGENT_SALON_STATS_DAYS days (default 30); `salon prune` deletes older
  rows. A forgotten seat's rows stay (seat NULL, name kept) until then.
* An empty ledger is said to be empty (`ledger.empty`, `totals: null`): nothing was
  measured, which is not a measured zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db.models import CharField, Count, Func, Max, Min, Q, Sum
from django.db.models.functions import Cast, TruncDay, TruncHour
from django.utils import timezone

from bus import rules, wire
from bus.models import DecisionCount, Entry, ReadCount, Request, Room, Seat, WakeDecision

SCHEMA = "salon.stats/1"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
DEFAULT_SINCE = "24h"
# The kind of decision each reason belongs to; unknown reasons are `rule` decisions.
KIND_OF_REASON = {"quiet": "quiet"}
KINDS = ("rule", "quiet")
# Reasons listed in every report (with 0), so the shape does not depend on the traffic.
LISTED_REASONS = tuple(r for r in rules.REASONS if r != "sender")

TOLD = Q(told_at__isnull=False)
# wakeUps keys of the ways of telling (WakeDecision.TELLERS); together they make `told`.
TOLD_BY = {
    "announced": ("wait", "monitor"),
    "turnsHeld": ("stop",),
    # at the start of a session, or of a turn (the context its prompt is sent with)
    "toldAtStart": ("start", "prompt"),
    "toldByReading": ("inbox",),
}
# A seat of another machine (`agent@device#sid8`, a name only the relay writes) is told
# by its own machine: its wake-ups here are decided there (rules.decided_there, as SQL),
# never counted as untold.
LOCAL = ~Q(seat_name__contains="@")
NO_SESSION = Q(woken=True, listener=WakeDecision.LISTENER_NONE) & ~TOLD & LOCAL
# The letterbox and the safety net (bus.services.triage): what each changed,
# and the letterbox judgements that failed (so woke, as the rule had said). A net row of
# an entry the rule woke (its reason is the rule's, not rules.NET) is the net's second
# look at a letterbox "no": held back unless the net said yes, which counts as the net's.
SECOND_LOOK = Q(judge=rules.NET) & ~Q(reason=rules.NET)
TRIAGE = {
    "letterbox": Q(judge=rules.LETTERBOX, judgement="no")
    | (SECOND_LOOK & Q(judgement__in=["no", "failed"])),
    "net": Q(judge=rules.NET, judgement="yes"),
    "letterboxFailed": Q(judge=rules.LETTERBOX, judgement="failed"),
}


def parse_since(text: str) -> timedelta:
    """`90m`, `24h`, `7d` (bus.rules.parse_duration): how far back the window reaches."""
    return rules.parse_duration(text)


# ---------------------------------------------------------------- the numbers


def _reading() -> dict:
    return {"reads": 0, "entries": 0, "chars": 0, "clipped": 0, "charsHeldBack": 0}


def _decisions() -> dict:
    return {
        "total": 0,
        "byKind": dict.fromkeys(KINDS, 0),
        "byReason": dict.fromkeys(LISTED_REASONS, 0),
    }


def _wake_ups() -> dict:
    return {
        "decided": 0,
        "told": 0,
        "pushed": 0,
        **dict.fromkeys(TOLD_BY, 0),
        "notTold": 0,
        "reachedNoSession": 0,
    }


def _triage() -> dict:
    return dict.fromkeys(TRIAGE, 0)


@dataclass
class _Tally:
    entries: int = 0
    reading: dict = field(default_factory=_reading)
    decisions: dict = field(default_factory=_decisions)
    wake_ups: dict = field(default_factory=_wake_ups)
    triage: dict = field(default_factory=_triage)
    quieted: int = 0

    def decide(self, reason: str, n: int) -> None:
        kind = KIND_OF_REASON.get(reason, "rule")
        self.decisions["total"] += n
        self.decisions["byKind"][kind] = self.decisions["byKind"].get(kind, 0) + n
        self.decisions["byReason"][reason] = self.decisions["byReason"].get(reason, 0) + n

    def add(self, other: _Tally) -> None:
        self.entries += other.entries
        self.quieted += other.quieted
        for key, value in other.reading.items():
            self.reading[key] += value
        for key, value in other.wake_ups.items():
            self.wake_ups[key] += value
        for key, value in other.triage.items():
            self.triage[key] += value
        self.decisions["total"] += other.decisions["total"]
        for group in ("byKind", "byReason"):
            for key, value in other.decisions[group].items():
                self.decisions[group][key] = self.decisions[group].get(key, 0) + value

    def room_dict(self, name: str) -> dict:
        return {
            "room": name,
            "entries": self.entries,
            "reading": self.reading,
            "decisions": self.decisions,
            "wakeUps": self.wake_ups,
            "triage": self.triage,
        }

    def seat_dict(self, name: str, forgotten: bool) -> dict:
        return {
            "seat": name,
            "forgotten": forgotten,
            "quieted": self.quieted,
            "reading": self.reading,
            "wakeUps": self.wake_ups,
            "triage": self.triage,
        }


def _rooms(names: Sequence[str]) -> list[Room]:
    """The rooms asked for (archived ones too: their numbers are still numbers)."""
    rooms = []
    for name in names:
        name = rules.validate_name(name, "room")
        room = Room.objects.filter(name=name).first()
        if room is None:
            known = ", ".join(Room.objects.values_list("name", flat=True)) or "none yet"
            raise rules.RuleError(f"there is no room {name!r} (rooms: {known})")
        rooms.append(room)
    return rooms


@dataclass
class Window:
    since: datetime
    until: datetime
    rooms: list[Room]

    def of(self, query, field_name: str, *, whole_hours: bool = False):
        start = self.since
        if whole_hours:  # an hour's counter overlaps the window if it ends after `since`
            start = self.since - timedelta(hours=1)
            query = query.filter(**{f"{field_name}__gt": start})
        else:
            query = query.filter(**{f"{field_name}__gte": start})
        query = query.filter(**{f"{field_name}__lte": self.until})
        if self.rooms:
            query = query.filter(room__in=self.rooms)
        return query


def _window(rooms: Sequence[str], since: timedelta | str, at: datetime | None) -> Window:
    if isinstance(since, str):
        since = parse_since(since)
    until = at or timezone.now()
    # `--since 9999w` reaches before anything was recorded: start at the epoch instead
    start = EPOCH if since >= until - EPOCH else until - since
    return Window(since=start, until=until, rooms=_rooms(rooms))


def _coverage(window: Window) -> dict:
    """The window the numbers actually cover: first and last record, how many."""
    firsts, lasts, records = [], [], 0
    for query, name, whole, first, last in (
        (WakeDecision.objects, "decided_at", False, "decided_at", "decided_at"),
        (DecisionCount.objects, "decided_at", False, "decided_at", "decided_at"),
        (ReadCount.objects, "hour", True, "first_at", "last_at"),
    ):
        found = window.of(query, name, whole_hours=whole).aggregate(
            first=Min(first), last=Max(last), n=Count("id")
        )
        records += found["n"]
        if found["n"]:
            firsts.append(found["first"])
            lasts.append(found["last"])
    return {
        "empty": records == 0,
        "first": wire.iso(min(firsts)) if firsts else None,
        "last": wire.iso(max(lasts)) if lasts else None,
        "records": records,
    }


class _Tallies:
    """The tallies of one report: one per room, and one per seat in a room when asked."""

    def __init__(self, window: Window, *, seats: bool):
        self.window = window
        self.seats = seats
        self.per_room: dict[int, _Tally] = {}
        self.per_seat: dict[tuple[int, str], _Tally] = {}

    def of(self, row: dict) -> list[_Tally]:
        """The room's tally, then the seat's when seats are counted."""
        tallies = [self.per_room.setdefault(row["room_id"], _Tally())]
        if self.seats:
            tallies.append(self.per_seat.setdefault((row["room_id"], row["seat_name"]), _Tally()))
        return tallies

    def count_entries(self) -> None:
        """How many entries each room got."""
        query = self.window.of(Entry.objects, "ts").values("room_id")
        for row in query.annotate(n=Count("id")).order_by():
            self.per_room.setdefault(row["room_id"], _Tally()).entries = row["n"]

    def count_wake_ledger(self) -> None:
        """Who was woken, who was told and how, what triage made of it."""
        group = ["room_id", "reason", "woken"] + (["seat_name"] if self.seats else [])
        told_by = {
            key: Count("id", filter=Q(told_by__in=tellers) & LOCAL)
            for key, tellers in TOLD_BY.items()
        }
        rows = (
            self.window.of(WakeDecision.objects, "decided_at")
            .values(*group)
            .annotate(
                n=Count("id"),
                local=Count("id", filter=LOCAL),
                pushed=Count("id", filter=Q(pushed_at__isnull=False) & LOCAL),
                **told_by,
                told=Count("id", filter=TOLD & LOCAL),
                no_session=Count("id", filter=NO_SESSION),
                **{key: Count("id", filter=q) for key, q in TRIAGE.items()},
            )
            .order_by()
        )
        for row in rows:
            for index, tally in enumerate(self.of(row)):
                for key in TRIAGE:
                    tally.triage[key] += row[key]
                # A net row is a judgement of a decision send already counted (DecisionCount).
                if index == 0 and row["reason"] != rules.NET:
                    tally.decide(row["reason"], row["n"])
                if row["reason"] == "quiet":
                    tally.quieted += row["n"]
                if row["woken"]:
                    _count_wake_up(tally.wake_ups, row)

    def count_send_decisions(self) -> None:
        """The decisions send made without a ledger row (DecisionCount)."""
        rows = (
            self.window.of(DecisionCount.objects, "decided_at")
            .values("room_id", "reason")
            .annotate(n=Sum("count"))
            .order_by()
        )
        for row in rows:
            self.per_room.setdefault(row["room_id"], _Tally()).decide(row["reason"], row["n"])

    def count_reading(self) -> None:
        """What was read, how much of it, and how much was clipped."""
        sums = {
            "reads": Sum("reads"),
            "entries": Sum("entries"),
            "chars": Sum("chars"),
            "clipped": Sum("clipped"),
            "charsHeldBack": Sum("chars_held_back"),
        }
        group = ["room_id"] + (["seat_name"] if self.seats else [])
        rows = (
            self.window.of(ReadCount.objects, "hour", whole_hours=True)
            .values(*group)
            .annotate(**sums)
            .order_by()
        )
        for row in rows:
            for tally in self.of(row):
                for key in sums:
                    tally.reading[key] += row[key] or 0

    def rooms_and_totals(self) -> tuple[list[dict], dict]:
        """Each room's numbers (by name, seats inside), and the sum over them."""
        for room in self.window.rooms:  # a room asked for by name is listed, even with nothing
            self.per_room.setdefault(room.pk, _Tally())
        names = dict(Room.objects.filter(pk__in=self.per_room).values_list("pk", "name"))
        existing = set()
        if self.seats:
            named = {seat for _, seat in self.per_seat}
            existing = set(Seat.objects.filter(name__in=named).values_list("name", flat=True))
        listed, totals = [], _Tally()
        for room_id in sorted(self.per_room, key=lambda pk: names[pk]):
            tally = self.per_room[room_id]
            totals.add(tally)
            item = tally.room_dict(names[room_id])
            if self.seats:
                item["seats"] = [
                    self.per_seat[key].seat_dict(key[1], forgotten=key[1] not in existing)
                    for key in sorted(k for k in self.per_seat if k[0] == room_id)
                ]
            listed.append(item)
        summed = totals.room_dict("")
        del summed["room"]
        return listed, summed


def _count_wake_up(wake: dict, row: dict) -> None:
    wake["decided"] += row["local"]
    wake["told"] += row["told"]
    wake["pushed"] += row["pushed"]
    for key in TOLD_BY:
        wake[key] += row[key]
    wake["notTold"] += row["local"] - row["told"]
    wake["reachedNoSession"] += row["no_session"]


def report(
    *,
    rooms: Sequence[str] = (),
    since: timedelta | str = DEFAULT_SINCE,
    seats: bool = False,
    at: datetime | None = None,
) -> dict:
    """The `salon.stats/1` document (docs-stats.md pins its keys)."""
    window = _window(rooms, since, at)
    ledger = _coverage(window)
    document = {
        "schema": SCHEMA,
        "generatedAt": wire.iso(window.until),
        "window": {
            "since": wire.iso(window.since),
            "until": wire.iso(window.until),
            "retentionDays": settings.STATS_DAYS,
        },
        "ledger": ledger,
        "totals": None,
        "rooms": [],
        "requests": requests_counts(window),
    }
    if ledger["empty"]:
        return document
    tallies = _Tallies(window, seats=seats)
    tallies.count_entries()
    tallies.count_wake_ledger()
    tallies.count_send_decisions()
    tallies.count_reading()
    document["rooms"], document["totals"] = tallies.rooms_and_totals()
    return document


def requests_counts(window: Window) -> dict:
    """Cross-project requests (an ask key) decided in the window, by what came of them:
    served by the project's code, gated (asked the judge first), denied (a denial, or a
    gate the judge declined) and woken (a person's turn: a wake verdict, or a serve or
    gate that fell to wake); "turnsSaved" are those that woke nobody."""
    rows = window.of(Request.objects, "decided_at")
    found = rows.aggregate(
        served=Count("pk", filter=Q(outcome=Request.SERVED)),
        gated=Count("pk", filter=Q(verdict="gate")),
        denied=Count("pk", filter=Q(outcome__in=[Request.DENIED, Request.DECLINED])),
        woken=Count("pk", filter=Q(outcome=Request.WOKEN)),
        pending=Count("pk", filter=Q(outcome="")),
    )
    found["turnsSaved"] = found["served"] + found["denied"]
    return found


# ---------------------------------------------------------------- over time (the charts)


def bucket_for(span: timedelta) -> timedelta:
    """Hours up to a week, days beyond."""
    return timedelta(hours=1) if span <= timedelta(days=7) else timedelta(days=1)


class _Bucket(Func):
    """The UTC hour (`2026-11-30 14`) or day (`2026-11-30`) of a timestamp, as text,
    computed natively: Django's TruncHour calls a Python function per row on SQLite.
    Measured 2026-11-30 on 100,000 entries and as many wake-ups over 30 days (SQLite):
    the 30-day timeline took 2.8 s with TruncHour/TruncDay, 0.8 s with this; 7 days
    1.2 s → 0.37 s."""

    output_field = CharField()

    def __init__(self, expression, *, day: bool):
        self.day = day
        super().__init__(expression)

    def as_sqlite(self, compiler, connection, **extra):
        # `%%%%` survives Func's own %-formatting and the backend's `%%` → `%`.
        pattern = "%%%%Y-%%%%m-%%%%d" + ("" if self.day else " %%%%H")
        return self.as_sql(
            compiler, connection, template=f"strftime('{pattern}', %(expressions)s)", **extra
        )

    def as_postgresql(self, compiler, connection, **extra):
        pattern = "YYYY-MM-DD" + ("" if self.day else " HH24")
        return self.as_sql(
            compiler,
            connection,
            template=f"to_char(%(expressions)s AT TIME ZONE 'UTC', '{pattern}')",
            **extra,
        )

    def as_sql(self, compiler, connection, **extra):
        if "template" in extra:
            return super().as_sql(compiler, connection, **extra)
        trunc = TruncDay if self.day else TruncHour  # another database: Django's own
        expression = Cast(trunc(self.source_expressions[0], tzinfo=UTC), CharField())
        return compiler.compile(expression)


def _parse_bucket(value) -> datetime:
    if isinstance(value, datetime):
        return value.astimezone(UTC)
    text = str(value)[:13]
    return datetime.strptime(text, "%Y-%m-%d %H" if len(text) == 13 else "%Y-%m-%d").replace(
        tzinfo=UTC
    )


def _floor(moment: datetime, step: timedelta) -> datetime:
    moment = moment.astimezone(UTC)
    if step >= timedelta(days=1):
        return moment.replace(hour=0, minute=0, second=0, microsecond=0)
    return moment.replace(minute=0, second=0, microsecond=0)


def timeline(*, rooms: Sequence[str] = (), since: timedelta | str = DEFAULT_SINCE, at=None) -> dict:
    """Entries, wake-ups and wake-ups that reached no session per hour (per day beyond a
    week), per room: {"step", "buckets": [datetime], "entries": {room: [n]}, "wakeUps":
    {room: [n]}, "reachedNoSession": [n]}. Buckets are UTC."""
    window = _window(rooms, since, at)
    step = bucket_for(window.until - window.since)
    day = step >= timedelta(days=1)
    first = _floor(window.since, step)
    count = int((_floor(window.until, step) - first) / step) + 1
    buckets = [first + i * step for i in range(count)]
    index = {b: i for i, b in enumerate(buckets)}

    names = dict(Room.objects.values_list("pk", "name"))

    def per_room(query, field_name: str) -> dict[str, list[int]]:
        series: dict[str, list[int]] = {}
        rows = (
            window.of(query, field_name)
            .annotate(bucket=_Bucket(field_name, day=day))
            .values("room_id", "bucket")
            .annotate(n=Count("id"))
            .order_by()
        )
        for row in rows:
            slot = index.get(_floor(_parse_bucket(row["bucket"]), step))
            if slot is not None:
                series.setdefault(names[row["room_id"]], [0] * count)[slot] += row["n"]
        return dict(sorted(series.items()))

    no_session = [0] * count
    for values in per_room(WakeDecision.objects.filter(NO_SESSION), "decided_at").values():
        no_session = [a + b for a, b in zip(no_session, values, strict=True)]
    return {
        "step": step,
        "buckets": buckets,
        "entries": per_room(Entry.objects, "ts"),
        "wakeUps": per_room(WakeDecision.objects.filter(Q(woken=True) & LOCAL), "decided_at"),
        "reachedNoSession": no_session,
    }
