"""The bus's tables, and the verbs that ask them. Only bus.services writes.

Ordering: every entry has a per-room sequence number `seq`, taken from its room's
counter inside the sending transaction. Taking it locks the room row, so within a room
seq order is commit order on SQLite and on PostgreSQL alike; cursors are seq values.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q
from django.db.models.functions import Lower

from bus import rules, strict
from bus.ids import uuid7


class StoredJSONField(models.JSONField):
    """A JSONField whose rows are read with bus.strict.read_stored: a value that cannot
    be read safely (a row changed outside the bus: nested hundreds deep, a number Python
    cannot hold) comes back as its text instead of failing the whole query, so one row
    cannot break a room for its readers.

    The column is a plain JSONField's (deconstruct says so): no migration, no change to
    how anything is written."""

    def from_db_value(self, value, expression, connection):
        if isinstance(value, str):
            return strict.read_stored(value)
        return super().from_db_value(value, expression, connection)

    def deconstruct(self):
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs


def current_membership(through: str = "") -> Q:
    """A membership not left (a part sets left_at; the row stays), as a filter on
    Membership or through a relation to it (`through="memberships__"`). Its SQL form is
    bus.ledger.current."""
    return Q(**{f"{through}left_at__isnull": True})


class RoomQuerySet(models.QuerySet):
    def visible(self):
        return self.filter(archived_at__isnull=True)

    def of_seat(self, seat):
        """The rooms this seat is in now (archived ones included)."""
        return self.filter(current_membership("memberships__"), memberships__seat=seat)


class Room(models.Model):
    name = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    archived_at = models.DateTimeField(null=True, blank=True)
    # The seq of the newest entry; incremented under the row lock by send.
    last_seq = models.BigIntegerField(default=0)

    objects = RoomQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Agent(models.Model):
    """A project: `web-app`, or `web-app@macmini` for one seen through a relay."""

    name = models.CharField(max_length=64, unique=True)
    host = models.CharField(max_length=255, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    # The project directory the agent's sessions run in, where its policy for requests is
    # (bus.services.requests): recorded by `salon install` and at each session start
    # (services.seats.record_root). Null: never recorded (a remote agent, a cron writer).
    # Nullable so that adding it alters the table in place: SQLite's schema editor would
    # rebuild it for a NOT NULL column, dropping the roster triggers (RosterStamp).
    root = models.TextField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class SeatQuerySet(models.QuerySet):
    def in_rooms(self, rooms):
        """Seats currently in any of `rooms` (Room rows, or a queryset of them)."""
        return self.filter(
            current_membership("memberships__"), memberships__room__in=rooms
        ).distinct()


class Seat(models.Model):
    """One session of an agent on the bus (`web-app#3f9c1a20`), or the bare agent name."""

    # agent (≤ 64) + "#" + a session id that may grow to its full length
    name = models.CharField(max_length=200, unique=True)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="seats")
    session_id = models.CharField(max_length=128, blank=True, default="")
    host = models.CharField(max_length=255, blank=True, default="")
    remote = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    # Liveness evidence (rules.liveness): a hook/CLI/tool call sets last_seen; an open stream or a
    # running stdio server keeps pushing live_until a little into the future.
    last_seen = models.DateTimeField(null=True, blank=True)
    live_until = models.DateTimeField(null=True, blank=True)
    last_wrote = models.DateTimeField(null=True, blank=True)
    # An MCP DELETE: gone from then until a newer sign of life (last_seen after it).
    signed_off_at = models.DateTimeField(null=True, blank=True)
    quiet = models.BooleanField(default=False)
    quiet_until = models.DateTimeField(null=True, blank=True)
    focus_text = models.TextField(blank=True, default="")
    focus_files = StoredJSONField(default=list, blank=True)
    focus_phase = models.CharField(max_length=16, blank=True, default="")
    focus_ts = models.DateTimeField(null=True, blank=True)
    # A hook asks for a focus once ever per seat (services.seats.claim_focus_request).
    focus_asked_at = models.DateTimeField(null=True, blank=True)
    # The agent's default rooms are added to a seat once, never re-added after a part.
    defaults_applied = models.BooleanField(default=False)
    # Counter behind the SSE event ids of this seat's pushes.
    push_counter = models.BigIntegerField(default=0)
    # The last time a Stop hook ran for this seat (services.telling.claim_nudges): a hook
    # can hold one of its turns. Read at decision time for the stats' "reached no session".
    hook_seen_at = models.DateTimeField(null=True, blank=True)
    # Who sits in the seat (rules.CLIENTS): the agent CLI whose hooks or `salon mcp` it
    # checked in through ("claude", "codex", "gemini", "opencode"), "person" for a staff
    # user at the person's page or `salon top`, "" when nothing said (a bare MCP client).
    client = models.CharField(max_length=16, blank=True, default="")

    objects = SeatQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        indexes = [
            # agents: seats of an agent; prune: gone seats by last_seen
            models.Index(fields=["agent", "name"], name="seat_by_agent"),
            models.Index(fields=["last_seen"], name="seat_prune_by_last_seen"),
        ]

    def __str__(self) -> str:
        return self.name

    def liveness(self, at) -> str:
        """live / unknown / gone (rules.liveness): an open stream or a running server
        keeps live_until ahead; otherwise the last sign of life decides."""
        stream_open = bool(self.live_until and self.live_until > at)
        return rules.liveness(self.last_seen, stream_open, at, signed_off=self.signed_off_at)

    def facts(self) -> rules.SeatFacts:
        return rules.SeatFacts(
            seat=self.name, agent=self.agent.name, quiet=self.quiet, quiet_until=self.quiet_until
        )

    def is_quiet(self, at) -> bool:
        return rules.quiet_active(self.quiet, self.quiet_until, at)

    def listener(self, at, liveness: str) -> str:
        """What could tell this seat of a wake-up decided at `at` (WakeDecision.listener)."""
        if self.live_until and self.live_until > at:
            return WakeDecision.LISTENER_LIVE
        if self.hook_seen_at and liveness != rules.GONE:
            return WakeDecision.LISTENER_HOOK
        return WakeDecision.LISTENER_NONE


class MembershipQuerySet(models.QuerySet):
    def current(self):
        """Memberships not left (current_membership)."""
        return self.filter(current_membership())

    def in_visible_rooms(self):
        return self.filter(room__archived_at__isnull=True)


class Membership(models.Model):
    """A seat in a room, and its cursor there (the seq of the last entry it read).

    Parting sets left_at instead of deleting the row, so an agent's default rooms are
    never re-added to a seat that left them.
    """

    seat = models.ForeignKey(Seat, on_delete=models.CASCADE, related_name="memberships")
    room = models.ForeignKey(Room, on_delete=models.CASCADE, related_name="memberships")
    cursor = models.BigIntegerField(default=0)
    # A new seat inherits its siblings' cursor, yet what they wrote in the last hour stays
    # unread for it: the entries by other seats of its agent in (held_from, cursor] are
    # unread too (rules.first_cursor). None: nothing held.
    held_from = models.BigIntegerField(null=True, blank=True)
    joined_at = models.DateTimeField(auto_now_add=True)
    left_at = models.DateTimeField(null=True, blank=True)

    objects = MembershipQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["seat", "room"], name="membership_one_per_seat_room"),
            models.CheckConstraint(
                condition=Q(cursor__gte=0), name="membership_cursor_not_negative"
            ),
        ]
        indexes = [
            # the readers of a room (wake decisions at send time)
            models.Index(
                fields=["room", "seat"],
                name="membership_readers_of_room",
                condition=current_membership(),
            ),
        ]

    def __str__(self) -> str:
        return f"seat {self.seat_id} in room {self.room_id} at {self.cursor}"


class RosterStamp(models.Model):
    """One row whose `stamp` changes whenever a room's readers, as a send's wake decisions
    see them, may have changed: a membership added, removed or parted, a seat renamed or
    its quiet changed, an agent renamed. Database triggers write it (migration 0010), so
    no writer can forget to, and a changed stamp is a new random number, never an earlier
    one again (a rolled-back change leaves the stamp it found). A send reads it in its own
    transaction and keeps a room's roster between sends while it is unchanged
    (bus.services.roster).

    SQLite only: there a writer holds the whole store, so the send's read is consistent
    with the roster it keeps. On PostgreSQL the row would be a lock every join and every
    quiet takes, and which a send's own row locks could meet in a deadlock; it is not
    written there, and each send reads its room's roster again.

    Django's SQLite schema editor rebuilds a table for some changes to it, which drops its
    triggers: a migration that alters bus_membership, bus_seat or bus_agent must create
    them again (tests/test_roster.py checks they are all there).
    """

    stamp = models.BigIntegerField()

    def __str__(self) -> str:
        return f"roster stamp {self.stamp}"


def _new_entry_id() -> uuid.UUID:
    return uuid7()


class Entry(models.Model):
    VIA_CHOICES = [
        ("tool", "tool"),
        ("cli", "cli"),
        ("notify", "notify"),
        ("relay", "relay"),
        ("policy", "policy"),  # an ANSWER a project's policy wrote (bus.services.serving)
    ]

    id = models.UUIDField(primary_key=True, default=_new_entry_id, editable=False)
    # No index of its own: the unique (room, seq) serves every lookup by room.
    room = models.ForeignKey(Room, on_delete=models.PROTECT, related_name="entries", db_index=False)
    seq = models.BigIntegerField()
    ts = models.DateTimeField()
    sender = models.CharField(max_length=200)  # the seat name; kept when the seat is pruned
    sender_agent = models.CharField(max_length=64)
    type = models.CharField(max_length=8)
    to = StoredJSONField(default=list, blank=True)
    re = models.UUIDField(null=True, blank=True)
    content = models.TextField()
    meta = StoredJSONField(default=dict, blank=True)
    via = models.CharField(max_length=8, choices=VIA_CHOICES)
    sender_addr = models.CharField(max_length=64, blank=True, default="")
    sender_session = models.CharField(max_length=128, blank=True, default="")
    delivered_to = StoredJSONField(default=list, blank=True)
    delivery_errors = StoredJSONField(default=list, blank=True)
    signature = models.CharField(max_length=64)

    class Meta:
        ordering = ["room", "seq"]
        verbose_name_plural = "entries"
        constraints = [
            # also the index behind inbox/peek/history: room = R AND seq > cursor ORDER BY seq
            models.UniqueConstraint(fields=["room", "seq"], name="entry_room_seq"),
            models.CheckConstraint(
                condition=Q(type__in=["QUESTION", "ANSWER", "FACT", "REQUEST"]),
                name="entry_type_known",
            ),
        ]
        indexes = [
            # history --from NAME and the admin's source filter
            models.Index(fields=["sender", "ts"], name="entry_by_sender"),
            # the admin list: newest first
            models.Index(fields=["-ts"], name="entry_newest_first"),
            # the admin's source/participant/between filters by agent, newest first
            # (bench/admin_bench.py: 253 ms → see bench/RESULTS.md on a million entries)
            models.Index(fields=["sender_agent", "ts"], name="entry_by_sender_agent"),
            # the admin's room filter, newest first (instead of sorting the whole room)
            models.Index(fields=["room", "ts"], name="entry_room_newest"),
            # the admin's a<->b conversation filter: only addressed entries, by sender agent
            # (bus.admin.filters.conversation; 230 -> 40 ms for the rows query on 1M entries)
            models.Index(
                fields=["sender_agent", "ts"],
                name="entry_addressed_by_agent",
                condition=~Q(to=[]),
            ),
        ]

    def __str__(self) -> str:
        return strict.safe_text(f"{self.type} {self.sender} in {self.room_id}#{self.seq}")


class WakeDecisionQuerySet(models.QuerySet):
    def untold(self):
        """Rows that wake their seat and that no path has told yet (bus.ledger.untold)."""
        return self.filter(woken=True, told_at__isnull=True)

    def tell(self, at, by: str) -> int:
        """Tell these rows, each once: a conditional UPDATE … WHERE told_at IS NULL, so
        two claimers (two hooks, two waits) never both get a row. Returns how many this
        call told."""
        return self.untold().update(told_at=at, told_by=by)


class WakeDecision(models.Model):
    """The per-seat ledger: one row per entry per seat it was a claim on (woken or quieted).

    Two marks, each claimed at most once (a conditional UPDATE), across restarts and
    workers: `push_seq` / `pushed_at`, the push to a live stream, which is only a hint
    (the client may drop it); and `told_at` / `told_by`, the one telling of the entry to
    the seat, by whichever path surely reaches the model first (TELLERS).

    It is also what `salon stats` reads (bus.stats): `listener` says what could tell the
    seat when the decision was made — `live` (an open MCP stream, a running stdio server
    or a running `salon wait`: each keeps Seat.live_until ahead), `hook` (a Stop hook has
    run for the seat and the seat is not gone), `none`; "" for rows older than the stats.
    A seat that is forgotten (`prune`) leaves its rows behind with `seat` NULL and its
    name in `seat_name`, so the numbers about seats nobody was listening for outlive the
    seats; `prune` deletes the rows older than AGENT_SALON_STATS_DAYS.
    """

    LISTENER_LIVE, LISTENER_HOOK, LISTENER_NONE = "live", "hook", "none"
    # What can tell an entry: the wait tool's result, a `salon wait` line (the Monitor),
    # a Stop-hook block, the SessionStart context, an inbox or peek that returns it, the
    # context a prompt is sent with (a UserPromptSubmit hook: Codex CLI's).
    TELLERS = ("wait", "monitor", "stop", "start", "inbox", "prompt")

    # No index of its own: the unique (entry, seat) serves every lookup by entry.
    entry = models.ForeignKey(
        Entry, on_delete=models.CASCADE, related_name="decisions", db_index=False
    )
    seat = models.ForeignKey(
        Seat, null=True, blank=True, on_delete=models.SET_NULL, related_name="decisions"
    )
    seat_name = models.CharField(max_length=200, blank=True, default="")
    room = models.ForeignKey(Room, on_delete=models.CASCADE, related_name="+")
    seq = models.BigIntegerField()  # the entry's seq, so "after the cursor" needs no join
    woken = models.BooleanField()
    reason = models.CharField(max_length=16)
    decided_at = models.DateTimeField()
    listener = models.CharField(max_length=8, blank=True, default="")
    # The seat was gone when the decision was made: `send` left it out of its `wakes`, and
    # the entry waits for it (the live flow shows it so). None: not recorded (a row older
    # than this column, or one the safety net wrote for a seat that was just asking).
    gone = models.BooleanField(null=True, blank=True)
    push_seq = models.BigIntegerField(null=True, blank=True)  # SSE event id of the push
    pushed_at = models.DateTimeField(null=True, blank=True)
    told_at = models.DateTimeField(null=True, blank=True)
    told_by = models.CharField(max_length=8, blank=True, default="")
    # The one judgement of this entry for this seat (bus.services.triage).
    # `judge` is the half whose verdict stands (rules.LETTERBOX, a row the rule woke;
    # rules.NET, a row written for an entry the rule declined, or a woken row whose
    # letterbox "no" the net looked at again: rules.second_look), `judgement` its answer
    # (rules.JUDGEMENTS). `woken` follows the verdict: a letterbox "no" clears it, a net
    # "yes" sets it, and while a judge runs it is False, so nothing tells the entry
    # before the verdict (a judge that never answers is failed after its timeout).
    judge = models.CharField(max_length=9, blank=True, default="")
    judgement = models.CharField(max_length=8, blank=True, default="")
    judged_at = models.DateTimeField(null=True, blank=True)

    objects = WakeDecisionQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["entry", "seat"], name="wake_one_per_entry_seat"),
        ]
        indexes = [
            # waking entries of a seat after its cursor (stop hook, wait, stream start)
            models.Index(
                fields=["seat", "room", "seq"], name="wake_seat_room_seq", condition=Q(woken=True)
            ),
            # Last-Event-ID replay: pushes of a seat after an event id
            models.Index(
                fields=["seat", "push_seq"],
                name="wake_seat_push_seq",
                condition=Q(push_seq__isnull=False),
            ),
            # stats: the decisions of a time window; prune: the rows past the retention
            models.Index(fields=["decided_at"], name="wake_by_decided_at"),
        ]

    def __str__(self) -> str:
        return f"entry {self.entry_id} → seat {self.seat_name or self.seat_id}: {self.reason}"


class DecisionCount(models.Model):
    """Decisions that wake nobody and need no per-seat row, counted per entry and reason.

    A broadcast FACT in a room of 200 readers is 199 `not_a_claim` decisions: one row
    here (count 199), not 199 ledger rows (bus.stats has the measurement). Written in the
    sending transaction, insert-only (never a row lock to wait for).
    """

    # No index of its own: the unique (entry, reason) serves every lookup by entry.
    entry = models.ForeignKey(Entry, on_delete=models.CASCADE, related_name="+", db_index=False)
    room = models.ForeignKey(Room, on_delete=models.CASCADE, related_name="+")
    reason = models.CharField(max_length=16)
    count = models.IntegerField()
    decided_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["entry", "reason"], name="decisioncount_one_per_reason"
            ),
            models.CheckConstraint(condition=Q(count__gt=0), name="decisioncount_positive"),
        ]
        indexes = [
            # stats: the counts of a time window; prune: the rows past the retention
            models.Index(fields=["decided_at"], name="decisioncount_by_decided_at"),
        ]

    def __str__(self) -> str:
        return f"entry {self.entry_id}: {self.count} x {self.reason}"


class ReadCount(models.Model):
    """What inbox and peek handed out, per room, reading seat and hour (UTC).

    One counter row per (room, seat, hour), so two seats reading at once never wait for
    each other's row; bumped in the reading transaction by services.reading.read_inbox.
    """

    room = models.ForeignKey(Room, on_delete=models.CASCADE, related_name="+")
    seat_name = models.CharField(max_length=200)  # kept when the seat is forgotten
    hour = models.DateTimeField()
    first_at = models.DateTimeField()  # the first and the last read counted in this row
    last_at = models.DateTimeField()
    reads = models.BigIntegerField(default=0)  # inbox/peek calls that returned entries
    entries = models.BigIntegerField(default=0)
    chars = models.BigIntegerField(default=0)  # characters of content handed out
    clipped = models.BigIntegerField(default=0)  # entries handed out clipped
    chars_held_back = models.BigIntegerField(default=0)  # stored minus handed out, clipped

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["room", "seat_name", "hour"], name="readcount_one_per_room_seat_hour"
            ),
        ]
        indexes = [
            # stats: the counts of a time window; prune: the rows past the retention
            models.Index(fields=["hour"], name="readcount_by_hour"),
        ]

    def __str__(self) -> str:
        return f"{self.seat_name} read {self.entries} in room {self.room_id} at {self.hour}"


class Alias(models.Model):
    """A target alias: `to` names are resolved through these before storage."""

    name = models.CharField(max_length=64, unique=True)
    real = models.CharField(max_length=64)

    class Meta:
        verbose_name_plural = "aliases"

    def __str__(self) -> str:
        return f"{self.name} → {self.real}"


class Token(models.Model):
    """A bearer token for a label, stored as its SHA-256 (the token itself is shown once)."""

    label = models.CharField(max_length=64)
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["label"], name="token_active_by_label", condition=Q(revoked_at__isnull=True)
            ),
            # Every /mcp and /notify request asks for the label in any case (Acme, acme).
            models.Index(
                Lower("label"),
                name="token_active_by_folded_label",
                condition=Q(revoked_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"token for {self.label}"


class RequestQuerySet(models.QuerySet):
    def open(self):
        """Requests whose outcome is not settled yet: a serve or a gate not done."""
        return self.filter(outcome="")

    def holding(self):
        """Requests that wake nobody in the receiving project: served, denied, declined,
        or still being served or judged (a verdict of wake, and a fall to wake, hold
        nothing)."""
        return self.exclude(verdict="wake").exclude(outcome="woken")


class Request(models.Model):
    """A REQUEST with an ask key, and what the receiving project's policy made of it
    (bus.services.requests). One row per such entry, written in the sending (or landing)
    transaction with the verdict; a request to an agent of another machine has none here
    (it is evaluated where it lands).

    `outcome` is "" while a serve or a gate is to be done; `claimed_at`/`claimed_by` are
    the one claim of that work (a conditional UPDATE, never inside the work's
    transaction); then served, denied, declined (a gate the judge said no to) or woken
    (a wake verdict, or a serve or gate that fell to wake)."""

    SERVED, DENIED, DECLINED, WOKEN = "served", "denied", "declined", "woken"

    entry = models.OneToOneField(
        Entry, primary_key=True, on_delete=models.CASCADE, related_name="request"
    )
    room = models.ForeignKey(Room, on_delete=models.CASCADE, related_name="+")
    ask = models.CharField(max_length=300)
    agent = models.CharField(max_length=64)  # the receiving agent, on this store
    writer = models.CharField(max_length=200)  # the asker's seat
    verdict = models.CharField(max_length=8)  # serve, gate, wake, deny (bus.policy)
    reason = models.TextField()  # what the asker is shown
    argv = StoredJSONField(null=True, blank=True)  # to serve: the command line, filled in
    root = models.TextField(blank=True, default="")  # where it is served
    decided_at = models.DateTimeField()
    outcome = models.CharField(max_length=8, blank=True, default="")
    claimed_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=120, blank=True, default="")
    done_at = models.DateTimeField(null=True, blank=True)
    answer = models.UUIDField(null=True, blank=True)  # the ANSWER written for it
    seconds = models.FloatField(null=True, blank=True)  # how long the serve took

    objects = RequestQuerySet.as_manager()

    class Meta:
        indexes = [
            # the sweep: requests whose serve or gate is not done (services.requests.sweep)
            models.Index(fields=["decided_at"], name="request_open", condition=Q(outcome="")),
            # stats: the requests of a time window
            models.Index(fields=["decided_at"], name="request_by_decided_at"),
        ]

    def __str__(self) -> str:
        return f"ask {self.ask} to {self.agent}: {self.verdict} ({self.outcome or 'open'})"


class FileClaim(models.Model):
    """A seat's claim on a path of a repository (bus.services.claims): `path` is relative
    to the repository's top, a file, a directory or a glob (bus.rules.claims); `repo` is
    the real path of the repository's git common directory, so every worktree and every
    session of one project names it alike. A claim ends when released (released_at),
    when expires_at passes, or when its seat is gone."""

    KIND_HAND, KIND_FOCUS, KIND_SOFT = "hand", "focus", "soft"

    seat = models.ForeignKey(Seat, on_delete=models.CASCADE, related_name="file_claims")
    repo = models.TextField()
    path = models.CharField(max_length=256)
    kind = models.CharField(max_length=8, default=KIND_HAND)
    note = models.TextField(blank=True, default="")
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    released_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # The PreToolUse hook: the open claims of one repository.
            models.Index(
                fields=["repo", "expires_at"],
                name="fileclaim_open_by_repo",
                condition=Q(released_at__isnull=True),
            ),
            # agents, release: a seat's open claims.
            models.Index(
                fields=["seat", "expires_at"],
                name="fileclaim_open_by_seat",
                condition=Q(released_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.path} claimed by seat {self.seat_id}"


class ClaimDenial(models.Model):
    """An edit a claim held back (the PreToolUse hook): the same seat's edit of the same
    file goes ahead within bus.rules.REPEAT_WINDOW of it, and the holder is told once
    (passed_at)."""

    seat = models.ForeignKey(Seat, on_delete=models.CASCADE, related_name="+")
    holder = models.ForeignKey(Seat, on_delete=models.CASCADE, related_name="+")
    repo = models.TextField()
    path = models.CharField(max_length=4096)
    denied_at = models.DateTimeField()
    passed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["seat", "denied_at"], name="claimdenial_by_seat"),
        ]

    def __str__(self) -> str:
        return f"seat {self.seat_id} held back from {self.path}"
