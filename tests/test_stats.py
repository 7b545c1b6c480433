"""Stats: what the bus cost, and whether anyone was there to be woken (bus.stats,
`salon stats`, /admin/stats/).

Traffic is driven through bus.services, and, where a claim is about a real path, through
real processes: an MCP session with an open stream against a real daemon, a running
`salon wait`, a `salon hook stop`. The counts are read back from `salon stats --json`.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import shutil
import subprocess
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from bus import rules, services, stats
from bus.admin import charts
from bus.models import DecisionCount, Entry, Membership, ReadCount, Seat, WakeDecision
from tests.claude_kit import (
    API_SEAT,
    WEB_SEAT,
    WEB_SESSION,
    api,
    hook,
    hook_json,
    meet,
    ok,
    ok_json,
    project,
    query,
    salon,
    seat_row,
    send,
    web,
)
from tests.factories import entry_of, make_room, make_seat, set_liveness
from tests.factories import send as post
from tests.mcp_helpers import RawSession
from tests.support import REPO, dump_store, make_staff, run_django_script, run_salon, salon_cmd

# ---------------------------------------------------------------- the pinned shape

TOP_KEYS = {"schema", "generatedAt", "window", "ledger", "totals", "rooms", "requests"}
WINDOW_KEYS = {"since", "until", "retentionDays"}
LEDGER_KEYS = {"empty", "first", "last", "records"}
NUMBER_KEYS = {"entries", "reading", "decisions", "wakeUps", "triage"}
ROOM_KEYS = {"room", *NUMBER_KEYS}
READING_KEYS = {"reads", "entries", "chars", "clipped", "charsHeldBack"}
DECISION_KEYS = {"total", "byKind", "byReason"}
WAKE_KEYS = {
    "decided",
    "told",
    "pushed",
    "announced",
    "turnsHeld",
    "toldAtStart",
    "toldByReading",
    "notTold",
    "reachedNoSession",
}
SEAT_KEYS = {"seat", "forgotten", "quieted", "reading", "wakeUps", "triage"}
TRIAGE_KEYS = {"letterbox", "net", "letterboxFailed"}


def room_of(document: dict, name: str) -> dict:
    (room,) = [r for r in document["rooms"] if r["room"] == name]
    return room


def seat_of(room: dict, name: str) -> dict:
    (seat,) = [s for s in room["seats"] if s["seat"] == name]
    return seat


# ================================================================ services (one process)


@pytest.fixture
def team(db):
    return make_room("team")


def test_a_broadcast_fact_records_decisions_but_no_wake_up(team):
    writer = make_seat("web", team)
    for name in ("api", "docs", "ops"):
        make_seat(name, team)

    report = post(writer, team, "the build is green.", type="FACT")

    assert not WakeDecision.objects.exists()  # no per-seat row for a non-waking decision
    assert list(DecisionCount.objects.values_list("entry_id", "reason", "count")) == [
        (entry_of(report).id, "not_a_claim", 3)
    ]
    numbers = room_of(stats.report(), "team")
    assert numbers["entries"] == 1
    assert numbers["decisions"]["total"] == 3
    assert numbers["decisions"]["byKind"] == {"rule": 3, "quiet": 0}
    assert numbers["decisions"]["byReason"]["not_a_claim"] == 3
    assert numbers["wakeUps"]["decided"] == 0
    assert numbers["wakeUps"]["reachedNoSession"] == 0


def test_an_entry_addressed_to_someone_else_counts_as_not_addressed(team):
    writer = make_seat("web", team)
    make_seat("api", team)
    make_seat("docs", team)

    post(writer, team, "api: the schema moved.", to=["api"])

    numbers = room_of(stats.report(), "team")
    assert numbers["decisions"]["byReason"]["addressed"] == 1
    assert numbers["decisions"]["byReason"]["not_addressed"] == 1
    assert numbers["wakeUps"]["decided"] == 1


def test_a_question_to_a_seat_with_no_stream_no_watch_and_no_hook_reached_no_session(team):
    writer = make_seat("web", team)
    api = make_seat("api", team, liveness=rules.GONE)

    post(writer, team, "who owns the login form?", type="QUESTION", to=[api.name])

    row = WakeDecision.objects.get()
    assert (row.woken, row.listener, row.seat_name) == (True, "none", api.name)
    wake = room_of(stats.report(), "team")["wakeUps"]
    assert wake == {
        "decided": 1,
        "told": 0,
        "pushed": 0,
        "announced": 0,
        "turnsHeld": 0,
        "toldAtStart": 0,
        "toldByReading": 0,
        "notTold": 1,
        "reachedNoSession": 1,
    }


def test_a_live_seat_with_no_stream_no_watch_and_no_hook_reached_no_session_too(team):
    """Seen a minute ago (a CLI call) is not listening: nothing can wake it."""
    writer = make_seat("web", team)
    api = make_seat("api", team, liveness=rules.LIVE)

    post(writer, team, "who owns the login form?", type="QUESTION", to=[api.name])

    assert room_of(stats.report(), "team")["wakeUps"]["reachedNoSession"] == 1


def test_a_push_is_not_a_telling_until_a_way_that_reaches_the_model_tells_it(team):
    writer = make_seat("web", team)
    api = make_seat("api", team, liveness=rules.GONE)
    post(writer, team, "who owns the login form?", type="QUESTION", to=[api.name])
    services.seats.keep_live(seat=api)  # the session comes back and opens its stream
    claimed, _ = services.telling.claim_pushes(seat=api)
    assert len(claimed) == 1
    wake = room_of(stats.report(), "team")["wakeUps"]
    assert (wake["pushed"], wake["told"], wake["notTold"]) == (1, 0, 1)

    told = services.telling.collect_wakes(seat=api)["entries"]  # the wait tool

    assert [e["content"] for e in told] == ["who owns the login form?"]
    assert told[0]["pushedAt"] is not None
    wake = room_of(stats.report(), "team")["wakeUps"]
    assert (wake["pushed"], wake["told"], wake["announced"]) == (1, 1, 1)
    assert (wake["notTold"], wake["reachedNoSession"]) == (0, 0)


def test_an_entry_returned_by_an_inbox_read_counts_as_told_by_reading(team):
    writer = make_seat("web", team)
    api = make_seat("api", team)
    post(writer, team, "who owns the login form?", type="QUESTION", to=[api.name])

    services.reading.read_inbox(seat=api, room="team")

    wake = room_of(stats.report(), "team")["wakeUps"]
    assert (wake["toldByReading"], wake["told"], wake["notTold"]) == (1, 1, 0)
    assert services.telling.claim_nudges(seat=api) == []


def test_a_seat_with_an_open_stream_is_recorded_as_live(team):
    writer = make_seat("web", team)
    api = make_seat("api", team)
    services.seats.keep_live(seat=api)

    post(writer, team, "is the API frozen?", type="QUESTION")

    assert WakeDecision.objects.get().listener == "live"


def test_a_seat_whose_stop_hook_ran_is_a_listener_until_it_is_gone(team):
    writer = make_seat("web", team)
    api = make_seat("api", team)
    services.telling.claim_nudges(seat=api)  # its Stop hook ran: hooks are installed
    post(writer, team, "first?", type="QUESTION", to=[api.name])
    set_liveness(api, rules.GONE)
    post(writer, team, "second?", type="QUESTION", to=[api.name])

    listeners = list(WakeDecision.objects.order_by("seq").values_list("listener", flat=True))
    assert listeners == ["hook", "none"]
    wake = room_of(stats.report(), "team")["wakeUps"]
    assert (wake["notTold"], wake["reachedNoSession"]) == (2, 1)


def test_a_stop_hook_nudge_counts_as_a_turn_held(team):
    writer = make_seat("web", team)
    api = make_seat("api", team)
    post(writer, team, "who owns the login form?", type="QUESTION", to=[api.name])

    assert len(services.telling.claim_nudges(seat=api)) == 1

    wake = room_of(stats.report(), "team")["wakeUps"]
    assert (wake["turnsHeld"], wake["told"], wake["notTold"]) == (1, 1, 0)


def test_an_announcement_by_wait_counts_as_announced(team):
    writer = make_seat("web", team)
    api = make_seat("api", team)
    post(writer, team, "who owns the login form?", type="QUESTION", to=[api.name])

    assert len(services.telling.announce_wakes(seat=api)) == 1

    wake = room_of(stats.report(), "team")["wakeUps"]
    assert (wake["announced"], wake["told"]) == (1, 1)


def test_a_quiet_seats_decision_is_recorded_as_quiet(team):
    writer = make_seat("web", team)
    api = make_seat("api", team)
    services.seats.set_quiet(seat=api, duration="2h")

    post(writer, team, "who owns the login form?", type="QUESTION", to=[api.name])

    row = WakeDecision.objects.get()
    assert (row.woken, row.reason) == (False, "quiet")
    document = stats.report(seats=True)
    numbers = room_of(document, "team")
    assert numbers["decisions"]["byKind"] == {"rule": 0, "quiet": 1}
    assert numbers["wakeUps"]["decided"] == 0
    assert seat_of(numbers, api.name)["quieted"] == 1


def test_inbox_records_characters_handed_out_and_entries_clipped(team, settings):
    settings.INBOX_CHARS = 100
    writer = make_seat("web", team)
    reader = make_seat("api", team)
    long_text = "A sentence that goes on. " * 20  # 500 characters, clipped
    post(writer, team, long_text)
    post(writer, team, "short.")

    inbox = services.reading.read_inbox(seat=reader, room="team")

    handed_out = sum(len(e["content"]) for e in inbox["entries"])
    (clipped,) = [e for e in inbox["entries"] if "clipped" in e]
    cut = int(clipped["content"].rsplit("+", 1)[1].split()[0])
    row = ReadCount.objects.get()
    assert (row.seat_name, row.reads, row.entries) == (reader.name, 1, 2)
    assert (row.chars, row.clipped, row.chars_held_back) == (handed_out, 1, cut)
    reading = room_of(stats.report(), "team")["reading"]
    assert reading == {
        "reads": 1,
        "entries": 2,
        "chars": handed_out,
        "clipped": 1,
        "charsHeldBack": cut,
    }


def test_peek_counts_too_and_an_empty_read_writes_nothing(team):
    writer = make_seat("web", team)
    reader = make_seat("api", team)
    post(writer, team, "one.")

    services.reading.read_inbox(seat=reader, room="team", advance=False)
    services.reading.read_inbox(seat=reader, room="team")
    services.reading.read_inbox(seat=reader, room="team")  # nothing left: no write

    row = ReadCount.objects.get()
    assert (row.reads, row.entries) == (2, 2)


def test_a_failing_record_never_fails_the_send(team, monkeypatch):
    writer = make_seat("web", team)
    api = make_seat("api", team)
    make_seat("docs", team)

    def broken(*args, **kwargs):  # a database error, which aborts a PostgreSQL transaction
        with connection.cursor() as cursor:
            cursor.execute("SELECT * FROM no_such_stats_table")

    from bus.services import entries

    monkeypatch.setattr(entries._COUNT_INSERT, "insert", broken)  # the decision counts' write
    report = post(writer, team, "api: the schema moved.", to=["api"])

    assert report["wakes"] == [api.name]
    assert Entry.objects.filter(id=report["id"]).exists()
    assert WakeDecision.objects.filter(entry_id=report["id"], seat=api).exists()
    assert not DecisionCount.objects.exists()


def test_a_record_statement_failing_halfway_is_undone_alone_and_the_send_stands(
    team, monkeypatch, caplog
):
    """The decision counts are one statement, written without a savepoint on SQLite: its
    first row written, its second refused (a NOT NULL column), the statement is undone
    whole and the send's own rows commit."""
    writer = make_seat("web", team)
    api = make_seat("api", team)
    make_seat("docs", team)
    from bus.services import entries

    real = entries._COUNT_INSERT.insert

    def halfway(rows):
        first = rows[0]
        refused = DecisionCount(
            entry_id=first.entry_id,
            room_id=first.room_id,
            reason=None,
            count=1,
            decided_at=first.decided_at,
        )
        real([first, refused])

    monkeypatch.setattr(entries._COUNT_INSERT, "insert", halfway)
    report = post(writer, team, "api: the schema moved.", to=["api"])

    assert report["wakes"] == [api.name]
    assert Entry.objects.filter(id=report["id"]).exists()
    assert WakeDecision.objects.filter(entry_id=report["id"], seat=api).exists()
    assert not DecisionCount.objects.exists()
    assert "a stats record was not written" in caplog.text  # the statement did fail


def test_a_failing_record_never_fails_the_read(team, monkeypatch):
    writer = make_seat("web", team)
    reader = make_seat("api", team)
    post(writer, team, "one.")

    def broken(*args, **kwargs):
        with connection.cursor() as cursor:
            cursor.execute("SELECT * FROM no_such_stats_table")

    monkeypatch.setattr(services.recording, "count_reading", broken)
    inbox = services.reading.read_inbox(seat=reader, room="team")

    assert [e["content"] for e in inbox["entries"]] == ["one."]
    assert Membership.objects.get(seat=reader).cursor == 1
    assert not ReadCount.objects.exists()


def test_a_forgotten_seat_keeps_its_ledger_rows_and_its_name(team):
    writer = make_seat("web", team)
    gone = make_seat("api", team, liveness=rules.GONE)
    post(writer, team, "who owns the login form?", type="QUESTION", to=[gone.name])
    long_ago = timezone.now() - timedelta(days=8)
    Seat.objects.filter(pk=gone.pk).update(last_seen=long_ago)

    assert services.seats.prune(days=7)["seats"] == [gone.name]

    row = WakeDecision.objects.get()
    assert (row.seat_id, row.seat_name) == (None, gone.name)
    seat = seat_of(room_of(stats.report(seats=True), "team"), gone.name)
    assert seat["forgotten"] is True
    assert seat["wakeUps"]["reachedNoSession"] == 1


def test_prune_deletes_ledger_rows_older_than_the_retention_and_never_an_entry(team, settings):
    settings.STATS_DAYS = 30
    writer = make_seat("web", team)
    reader = make_seat("api", team)
    make_seat("docs", team)
    post(writer, team, "old question?", type="QUESTION", to=[reader.name])
    post(writer, team, "old fact.")
    services.reading.read_inbox(seat=reader, room="team")
    old = timezone.now() - timedelta(days=31)
    WakeDecision.objects.update(decided_at=old)
    DecisionCount.objects.update(decided_at=old)
    ReadCount.objects.update(hour=old.replace(minute=0, second=0, microsecond=0))
    post(writer, team, "new question?", type="QUESTION", to=[reader.name])
    post(writer, team, "new fact.")
    before = list(Entry.objects.order_by("seq").values_list("id", "content", "signature"))

    dry = services.seats.prune(dry_run=True)["ledger"]
    # the old question: api woken, docs not addressed; the old fact: both not a claim
    assert (dry["decisions"], dry["decisionCounts"], dry["readCounts"]) == (1, 2, 1)
    assert WakeDecision.objects.count() == 2  # a dry run deletes nothing

    result = services.seats.prune()["ledger"]

    assert (result["decisions"], result["decisionCounts"], result["readCounts"]) == (1, 2, 1)
    assert result["retentionDays"] == 30
    assert list(WakeDecision.objects.values_list("entry__content", flat=True)) == ["new question?"]
    assert sorted(DecisionCount.objects.values_list("entry__content", flat=True)) == [
        "new fact.",
        "new question?",
    ]
    assert not ReadCount.objects.exists()
    assert list(Entry.objects.order_by("seq").values_list("id", "content", "signature")) == before


def test_the_window_leaves_out_older_records(team):
    writer = make_seat("web", team)
    reader = make_seat("api", team)
    post(writer, team, "who?", type="QUESTION", to=[reader.name])
    WakeDecision.objects.update(decided_at=timezone.now() - timedelta(days=2))

    day = stats.report(since="24h")
    week = stats.report(since="7d")

    assert day["ledger"]["empty"] is True
    assert room_of(week, "team")["wakeUps"]["decided"] == 1
    assert week["ledger"]["records"] == 1


def test_a_window_longer_than_anything_recorded_starts_at_the_epoch(team):
    writer = make_seat("web", team)
    post(writer, team, "who?", type="QUESTION", to=[make_seat("api", team).name])

    document = stats.report(since="99999999w")

    assert document["window"]["since"] == "1970-01-01T00:00:00.000Z"
    assert document["totals"]["wakeUps"]["decided"] == 1


def test_an_empty_ledger_says_so_and_is_never_a_measured_zero(db):
    document = stats.report()

    assert document["ledger"] == {"empty": True, "first": None, "last": None, "records": 0}
    assert document["totals"] is None
    assert document["rooms"] == []


def test_the_report_has_the_pinned_keys(team):
    writer = make_seat("web", team)
    reader = make_seat("api", team)
    post(writer, team, "who?", type="QUESTION", to=[reader.name])
    services.reading.read_inbox(seat=reader, room="team")

    document = stats.report(seats=True)

    assert set(document) == TOP_KEYS
    assert document["schema"] == "salon.stats/1"
    assert set(document["window"]) == WINDOW_KEYS
    assert set(document["ledger"]) == LEDGER_KEYS
    assert set(document["totals"]) == NUMBER_KEYS
    room = room_of(document, "team")
    assert set(room) == ROOM_KEYS | {"seats"}
    for numbers in (room, document["totals"]):
        assert set(numbers["reading"]) == READING_KEYS
        assert set(numbers["decisions"]) == DECISION_KEYS
        assert set(numbers["decisions"]["byKind"]) == set(stats.KINDS)
        assert set(numbers["wakeUps"]) == WAKE_KEYS
        assert set(numbers["triage"]) == TRIAGE_KEYS
    seat = seat_of(room, reader.name)
    assert set(seat) == SEAT_KEYS
    assert set(seat["reading"]) == READING_KEYS and set(seat["wakeUps"]) == WAKE_KEYS
    assert set(room_of(stats.report(), "team")) == ROOM_KEYS  # seats only when asked


def test_the_letterbox_and_the_net_are_counted_and_add_no_decisions(team, settings):
    settings.TRIAGE_CMD = ["judge"]  # the verdicts are recorded by hand below
    writer = make_seat("web", team)
    reader = make_seat("api", team)
    services.seats.declare_focus(seat=reader, text="the billing cron")
    post(writer, team, "who owns the login form?", type="QUESTION")
    post(writer, team, "who owns the schema?", type="QUESTION")
    post(writer, team, "who owns the billing cron?", type="QUESTION")
    first, second, third = services.triage.claim(seat=reader)
    again = services.triage.record(
        answers={first["row"]: "no", second["row"]: "failed", third["row"]: "no"}
    )
    # The seat has a focus: each letterbox "no" goes to the net for a second look.
    assert [item["row"] for item in again] == [first["row"], third["row"]]
    assert services.triage.record(answers={first["row"]: "no", third["row"]: "yes"}) == []
    post(writer, team, "the billing cron moved to 02:00", type="FACT")
    [net] = services.triage.claim(seat=reader)
    services.triage.record(answers={net["row"]: "yes"})

    numbers = room_of(stats.report(), "team")

    # Held back: the "no" the net let stand; the net's: its second-look yes and the FACT.
    assert numbers["triage"] == {"letterbox": 1, "net": 2, "letterboxFailed": 1}
    assert numbers["decisions"]["total"] == 4  # one per entry: judging decides nothing
    # the failed letterbox, the second look's yes and the net's yes on the FACT
    assert numbers["wakeUps"]["decided"] == 3
    text = stats_text()
    assert "1 held back by the letterbox · 2 told by the safety net · 1 letterbox failed" in text


def test_the_stats_page_shows_the_letterbox_and_the_net(team, settings, admin_client):
    settings.TRIAGE_CMD = ["judge"]
    writer = make_seat("web", team)
    reader = make_seat("api", team)
    post(writer, team, "who owns the login form?", type="QUESTION")
    [row] = services.triage.claim(seat=reader)
    services.triage.record(answers={row["row"]: "no"})
    page = admin_client.get(reverse("admin:salon_stats")).content.decode()
    assert re.search(r'id="salon-letterbox-card"><span class="n">1<', page)
    assert "told by the safety net" in page and "letterbox failed" in page


def stats_text() -> str:
    from bus.management.verbs.upkeep import format_report

    return format_report(stats.report(), "24h")


def test_rooms_narrow_the_report_and_an_unknown_room_is_refused(team):
    other = make_room("ops")
    writer = make_seat("web", team, other)
    make_seat("api", team, other)
    post(writer, team, "who?", type="QUESTION")
    post(writer, other, "deploy?", type="QUESTION")

    document = stats.report(rooms=["ops"])

    assert [r["room"] for r in document["rooms"]] == ["ops"]
    assert document["totals"]["wakeUps"]["decided"] == 1
    with pytest.raises(rules.RuleError, match=r"no room 'opps'.*ops, salon, team"):
        stats.report(rooms=["opps"])


def test_the_timeline_counts_per_hour_per_room(team):
    writer = make_seat("web", team)
    api = make_seat("api", team, liveness=rules.GONE)
    post(writer, team, "who?", type="QUESTION", to=[api.name])
    post(writer, team, "fyi.")

    line = stats.timeline(since="6h")

    assert line["step"] == timedelta(hours=1)
    assert len(line["buckets"]) == 7
    assert line["entries"] == {"team": [0, 0, 0, 0, 0, 0, 2]}
    assert line["wakeUps"] == {"team": [0, 0, 0, 0, 0, 0, 1]}
    assert line["reachedNoSession"] == [0, 0, 0, 0, 0, 0, 1]
    assert stats.timeline(since="30d")["step"] == timedelta(days=1)


@pytest.mark.parametrize(
    ("value", "ceiling"), [(0, 1), (1, 1), (2, 2), (3, 5), (7, 10), (11, 20), (120, 200)]
)
def test_chart_scales_round_up_to_1_2_5(value, ceiling):
    assert charts.nice_ceiling(value) == ceiling


def test_a_chart_keeps_the_biggest_rooms_and_sums_the_rest():
    now = timezone.now()
    series = {f"room-{i}": [i, 1] for i in range(9)}

    chart = charts.stacked_bars(series, [now, now + timedelta(hours=1)], timedelta(hours=1))

    names = [item["name"] for item in chart["legend"]]
    assert len(names) == charts.MAX_SERIES
    assert names[:2] == ["room-8", "room-7"]
    assert names[-1] == "4 other rooms"
    assert chart["total"] == sum(sum(v) for v in series.values())
    assert all(line["label"].replace(",", "").isdigit() for line in chart["grid"])


# ================================================================ the staff page


def test_the_stats_page_is_staff_only(client, django_user_model, team):
    url = reverse("admin:salon_stats")
    assert client.get(url).status_code == 302
    django_user_model.objects.create_user("someone", password="pw-12345678")
    client.login(username="someone", password="pw-12345678")
    response = client.get(url)
    assert response.status_code == 302 and "/admin/login/" in response["location"]


def test_the_admin_index_links_to_the_stats_page(admin_client, team):
    page = admin_client.get(reverse("admin:index")).content.decode()
    assert f'href="{reverse("admin:salon_stats")}"' in page


def test_the_stats_page_shows_the_numbers_and_draws_its_charts_inline(admin_client, team):
    writer = make_seat("web", team)
    api = make_seat("api", team, liveness=rules.GONE)
    post(writer, team, "who owns the login form?", type="QUESTION", to=[api.name])

    response = admin_client.get(reverse("admin:salon_stats"), {"since": "6h"})

    assert response.status_code == 200
    page = response.content.decode()
    assert page.count('<figure class="salon-chart">') >= 5
    assert 'class="salon-card alarm" id="salon-no-session-card"' in page
    # Nothing is fetched from elsewhere (no CDN, no chart library): it works offline.
    links = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert links and all(link.startswith(("/", "#", "?")) for link in links), links
    assert response.context["numbers"]["wakeUps"]["reachedNoSession"] == 1


def test_the_stats_page_says_when_the_ledger_is_empty(admin_client, db):
    page = admin_client.get(reverse("admin:salon_stats")).content.decode()
    assert 'id="salon-stats-empty"' in page
    assert 'class="salon-chart"' not in page


def test_the_stats_page_refuses_a_bad_window_or_room_and_shows_the_default(admin_client, team):
    for params in ({"since": "a week"}, {"since": "9999w"}, {"room": "no-such-room"}):
        response = admin_client.get(reverse("admin:salon_stats"), params)
        assert response.status_code == 200
        assert 'class="errornote"' in response.content.decode()
        assert response.context["since"] == "24h"


# ================================================================ real processes


def test_salon_stats_on_an_empty_ledger_says_so(env):
    done = ok(salon(env, "stats"))
    assert "no records" in done.stdout and "not a measured zero" in done.stdout
    document = ok_json(salon(env, "stats", "--json"))
    assert set(document) == TOP_KEYS
    assert document["ledger"]["empty"] is True and document["totals"] is None


@pytest.mark.parametrize(("since", "seconds"), [("90m", 5400), ("24h", 86400), ("7d", 604800)])
def test_since_parses_minutes_hours_and_days(env, since, seconds):
    document = ok_json(salon(env, "stats", "--since", since, "--json"))
    window = document["window"]
    span = datetime.fromisoformat(window["until"]) - datetime.fromisoformat(window["since"])
    assert span.total_seconds() == seconds


@pytest.mark.parametrize("args", [["--bogus"], ["--since", "a week"], ["--since"], ["--seat"]])
def test_an_unknown_flag_or_a_bad_duration_is_refused(env, args):
    done = salon(env, "stats", *args)
    assert done.returncode == 2, done.stdout
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("salon stats: ")
    assert done.stdout == ""


def test_salon_stats_moves_no_cursor_and_writes_nothing(env):
    meet(env)
    send(env, api, "team", "QUESTION", "who owns the login form?", "--to", "web-app")
    before = dump_store(env)

    ok(salon(env, "stats", "--seats"))
    ok(salon(env, "stats", "team", "--json"))

    assert dump_store(env) == before


def test_a_question_to_a_cli_seat_with_no_stream_no_watch_no_hook_reached_no_session(env):
    meet(env)
    send(env, web, "team", "FACT", "the build is green")
    send(env, web, "team", "QUESTION", "who owns the login form?", "--to", "api-service")

    document = ok_json(salon(env, "stats", "team", "--seats", "--json"))

    room = room_of(document, "team")
    assert room["decisions"]["byReason"]["not_a_claim"] == 1
    assert room["wakeUps"]["decided"] == 1
    assert room["wakeUps"]["reachedNoSession"] == 1
    assert seat_of(room, API_SEAT)["wakeUps"]["reachedNoSession"] == 1
    text = ok(salon(env, "stats", "team")).stdout
    assert "1 WAKE-UP REACHED NO SESSION" in text


def test_a_stop_hook_block_counts_as_a_turn_held_and_makes_the_seat_a_listener(env, tmp_path):
    meet(env)
    webdir = project(tmp_path, "web-app")
    send(env, api, "team", "QUESTION", "who owns the login form?", "--to", "web-app")

    held = hook_json(hook(env, "stop", WEB_SESSION, webdir))

    assert held["decision"] == "block" and "who owns the login form?" in held["reason"]
    send(env, api, "team", "QUESTION", "and the signup form?", "--to", "web-app")
    listeners = query(
        env, "SELECT listener FROM bus_wakedecision WHERE seat_name = ? ORDER BY seq", WEB_SEAT
    )
    assert [row[0] for row in listeners] == ["none", "hook"]
    wake = room_of(ok_json(salon(env, "stats", "--json")), "team")["wakeUps"]
    assert (wake["decided"], wake["turnsHeld"], wake["told"]) == (2, 1, 1)
    assert (wake["notTold"], wake["reachedNoSession"]) == (1, 0)


class Waiting:
    """A running `salon wait` of web-app's seat; its stdout lines land in a queue."""

    def __init__(self, env):
        self.env = dict(env, AGENT_SALON_NAME="web-app", CLAUDE_CODE_SESSION_ID=WEB_SESSION)
        self.process = subprocess.Popen(
            salon_cmd("wait"),
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def ready(self, timeout: float = 60) -> None:
        """It has marked the seat live: it is watching."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            row = seat_row(self.env, WEB_SEAT)
            if row and row[2] is not None:
                return
            assert self.process.poll() is None, self.process.stderr.read()
            time.sleep(0.05)
        raise AssertionError("salon wait did not start")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        self.process.wait(15)


def test_a_question_to_a_seat_with_a_running_wait_counts_as_announced(env):
    meet(env)
    waiting = Waiting(env)
    try:
        waiting.ready()
        send(env, api, "team", "QUESTION", "who owns the login form?", "--to", "web-app")
        line = waiting.lines.get(timeout=15)
    finally:
        waiting.stop()

    assert "who owns the login form?" in line
    (listener,) = query(env, "SELECT listener FROM bus_wakedecision")
    assert listener == ("live",)
    wake = room_of(ok_json(salon(env, "stats", "--json")), "team")["wakeUps"]
    assert (wake["decided"], wake["announced"], wake["told"], wake["reachedNoSession"]) == (
        1,
        1,
        1,
        0,
    )


@pytest.fixture
async def http():
    async with httpx.AsyncClient(timeout=10) as client:
        yield client


@pytest.mark.slow
async def test_a_question_to_a_seat_with_an_open_stream_counts_as_decided_and_pushed(
    daemon, env, http
):
    reader = await RawSession(http, daemon.url, "label=api-service").open()
    writer = await RawSession(http, daemon.url, "label=web-app").open()
    seat = await reader.seat()
    async with reader.stream() as stream:
        await stream.next(comments=True)
        await writer.result(
            "send", {"text": "is the API frozen?", "type": "QUESTION", "to": [seat]}
        )
        event = await stream.next(timeout=10)
    assert event["message"]["params"]["content"] == "is the API frozen?"

    done = await asyncio.to_thread(run_salon, "stats", "--seats", "--json", env=env)
    document = json.loads(ok(done).stdout)
    room = room_of(document, "salon")
    assert room["wakeUps"]["decided"] == 1
    assert room["wakeUps"]["pushed"] == 1
    assert room["wakeUps"]["reachedNoSession"] == 0
    assert seat_of(room, seat)["wakeUps"]["pushed"] == 1
    (listener,) = query(env, "SELECT listener FROM bus_wakedecision")
    assert listener == ("live",)


# ================================================================ the page in a real browser


def _chromium() -> str | None:
    for candidate in (os.environ.get("SALON_CHROMIUM"), "/usr/bin/chromium"):
        if candidate and Path(candidate).exists():
            return candidate
    return shutil.which("chromium") or shutil.which("chromium-browser")


try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    sync_playwright = None

CHROMIUM = _chromium()
ARTIFACTS = REPO / "tests" / "artifacts"
PASSWORD = "salon-staff-pw-9315"

# A day of traffic in three rooms, generated through bus.services with the clock of
# timezone.now moved forward step by step (every row is what the bus would have written
# at that time; entries keep valid signatures). Some seats keep a stream open, some run
# `salon wait`, some have a Stop hook, some have nothing: those are the wake-ups that
# reach no session.
SEED = r"""
import random
from datetime import timedelta

import django
django.setup()
from django.utils import timezone
from bus import services

rng = random.Random(9315)
start = timezone.now() - timedelta(hours=23, minutes=40)
clock = [start]
real_now = timezone.now
timezone.now = lambda: clock[0]
plan = {
    "team": ["web-app", "api-service", "docs", "mobile", "design"],
    "ops": ["ci", "deploy-bot", "api-service", "sre"],
    "research": ["notebook", "paper-bot", "web-app"],
}
ways = {"web-app": "stream", "api-service": "wait", "docs": "hook", "ci": "stream",
        "sre": "hook", "notebook": "stream", "mobile": "none", "design": "none",
        "deploy-bot": "none", "paper-bot": "none"}
seats = {}
for room, agents in plan.items():
    services.rooms.create_room(name=room)
    for agent in agents:
        if agent not in seats:
            seats[agent] = services.seats.check_in(
                agent=agent, session_id=f"{len(seats) + 1:04x}c0de-aaaa-4bbb-8ccc-0001")
        services.rooms.join_room(seat=seats[agent], room=room)
kinds = ["FACT"] * 6 + ["QUESTION"] * 2 + ["REQUEST", "ANSWER", "ANSWER"]
weights = {"team": 5, "ops": 3, "research": 1}
while clock[0] < real_now() - timedelta(minutes=2):
    hour = clock[0].hour
    busy = 3 if 8 <= (hour + 1) % 24 <= 18 else 1
    clock[0] += timedelta(minutes=rng.randint(3, 30) / busy)
    for agent, seat in seats.items():
        if ways[agent] in ("stream", "wait"):
            services.seats.keep_live(seat=seat, seconds=45)
        elif ways[agent] == "hook" and rng.random() < 0.5:
            services.seats.touch(seat=seat)
    room = rng.choices(list(weights), list(weights.values()))[0]
    sender = seats[rng.choice(plan[room])]
    kind = rng.choice(kinds)
    to = []
    if kind != "FACT" and rng.random() < 0.6:
        to = [rng.choice([a for a in plan[room] if seats[a].name != sender.name])]
    text = rng.choice([
        "The nightly build is green again.",
        "Who owns the session-cookie refresh?",
        "Deploy window moves to 14:00 UTC.",
        "Please review the migration guide draft.",
        "Schema change: users.email is now unique. " * rng.randint(1, 60),
    ])
    services.entries.send_entry(seat=sender, room=room, type=kind, to=to, text=text)
    for agent, seat in seats.items():
        if ways[agent] == "stream":
            services.telling.claim_pushes(seat=seat)
        elif ways[agent] == "wait":
            services.telling.announce_wakes(seat=seat)
        elif ways[agent] == "hook" and rng.random() < 0.5:
            services.telling.claim_nudges(seat=seat)
        if rng.random() < 0.15:
            for name in services.rooms.seat_rooms(seat):
                services.reading.read_inbox(seat=seat, room=name, limit=50)
"""


@pytest.fixture
def salon_with_a_day_of_traffic(daemon, env, tmp_path):
    make_staff(env, PASSWORD)
    run_django_script(env, SEED, tmp_path)
    return daemon


@pytest.mark.slow
@pytest.mark.skipif(sync_playwright is None, reason="the playwright package is not installed")
@pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium binary (apt-get install chromium, or set SALON_CHROMIUM)"
)
def test_the_stats_page_in_a_real_browser(salon_with_a_day_of_traffic, env):
    daemon = salon_with_a_day_of_traffic
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        context = browser.new_context(
            viewport={"width": 1400, "height": 900}, timezone_id="Europe/Berlin", locale="en-GB"
        )
        page = context.new_page()
        elsewhere: list[str] = []
        page.on(
            "request",
            lambda r: elsewhere.append(r.url) if not r.url.startswith(daemon.url) else None,
        )
        page.goto(daemon.url + "/admin/")
        page.fill("#id_username", "staff")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        page.click("#salon-stats-link a")
        expect(page.locator("#content h1")).to_have_text("Stats")
        expect(page.locator("#salon-stats-cards")).to_be_visible()
        assert page.locator(".salon-chart svg").count() >= 6
        expect(page.locator("#salon-no-session-card")).to_have_class("salon-card alarm")
        expect(page.locator("#salon-stats-rooms tbody tr")).to_have_count(4)  # 3 rooms + all
        page.screenshot(path=str(ARTIFACTS / "admin-stats.png"), full_page=True)

        page.select_option("#salon-stats-room", "ops")
        page.click("#salon-stats-form input[type=submit]")
        expect(page.locator("#salon-stats-rooms tbody tr")).to_have_count(1)
        page.click(".salon-windows a:has-text('last 7 days')")
        assert "since=7d" in page.url and "room=ops" in page.url
        expect(page.locator(".salon-windows a.selected")).to_have_text("last 7 days")
        page.screenshot(path=str(ARTIFACTS / "admin-stats-ops-7d.png"), full_page=True)
        context.close()
        browser.close()
    assert elsewhere == []
    document = ok_json(salon(env, "stats", "--json"))
    assert document["totals"]["wakeUps"]["reachedNoSession"] > 0
    assert document["totals"]["wakeUps"]["pushed"] > 0
    assert document["totals"]["wakeUps"]["announced"] > 0
    assert document["totals"]["wakeUps"]["turnsHeld"] > 0


# Three rooms of seats with long names, entries long enough for five-digit character
# counts: every column of both tables holds what a busy day puts there.
WIDE_SEED = r"""
import django
django.setup()
from bus import services

rooms = {"team": ["web-app", "api-service", "docs"], "ops": ["deploy-bot", "api-service"],
         "research": ["notebook", "paper-bot"]}
seats = {}
for room, agents in rooms.items():
    services.rooms.create_room(name=room)
    for agent in agents:
        seats.setdefault(agent, services.seats.check_in(
            agent=agent, session_id=f"{len(seats) + 1:04x}c0de-aaaa-4bbb-8ccc-0001"))
        services.rooms.join_room(seat=seats[agent], room=room)
for n in range(12):
    for room, agents in rooms.items():
        sender = seats[agents[n % len(agents)]]
        kind = "QUESTION" if n % 3 == 0 else "FACT"
        services.entries.send_entry(
            seat=sender, room=room, type=kind, text=f"Report {n}. " + "Schema change. " * 120)
for room, agents in rooms.items():
    for agent in agents:
        services.reading.read_inbox(seat=seats[agent], room=room, limit=50)
"""


@pytest.mark.slow
@pytest.mark.skipif(sync_playwright is None, reason="the playwright package is not installed")
@pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium binary (apt-get install chromium, or set SALON_CHROMIUM)"
)
def test_the_per_room_and_per_seat_tables_are_no_wider_than_their_header_bars(
    daemon, env, tmp_path
):
    """REGRESSION: at 1400 pixels the per-room and per-seat tables ran past the right end
    of their modules' header bars (their number columns refused to wrap their headings).
    Measured in a real browser at the widths a laptop and a desktop show."""
    make_staff(env, PASSWORD)
    run_django_script(env, WIDE_SEED, tmp_path)
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(daemon.url + "/admin/login/?next=/admin/stats/")
        page.fill("#id_username", "staff")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        expect(page.locator("#salon-stats-seats tbody tr")).to_have_count(7)
        for width in (1280, 1400, 1600):
            page.set_viewport_size({"width": width, "height": 900})
            for table in ("#salon-stats-rooms", "#salon-stats-seats"):
                sizes = page.locator(table).evaluate(
                    """table => {
                        const bar = table.closest(".module").querySelector("h2");
                        const t = table.getBoundingClientRect(), h = bar.getBoundingClientRect();
                        return {table: [t.left, t.right], bar: [h.left, h.right],
                                scroll: table.scrollWidth, client: table.clientWidth};
                    }"""
                )
                assert sizes["table"][0] >= sizes["bar"][0] - 0.5, (width, table, sizes)
                assert sizes["table"][1] <= sizes["bar"][1] + 0.5, (width, table, sizes)
                assert sizes["scroll"] <= sizes["client"] + 1, (width, table, sizes)
            page.screenshot(path=str(ARTIFACTS / f"admin-stats-{width}.png"), full_page=True)
        browser.close()
