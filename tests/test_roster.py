"""A room's roster kept between sends (bus.services.roster) while the store's roster stamp
is unchanged: every change that can change a wake decision must be seen by the next send,
whoever wrote it, and a change rolled back must leave nothing of itself behind."""

from __future__ import annotations

import json
import sqlite3
from itertools import combinations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from bus import rules, services
from bus.models import DecisionCount, Membership, RosterStamp, Seat, WakeDecision
from bus.services import roster
from tests.factories import make_room, make_seat, send

pytestmark = pytest.mark.django_db
on_sqlite = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="the roster stamp is written on SQLite only"
)


@pytest.fixture
def team():
    return make_room("team")


def woken_by(report: dict) -> set[str]:
    rows = WakeDecision.objects.filter(entry_id=report["id"], woken=True)
    return set(rows.values_list("seat_name", flat=True))


def stamp() -> int | None:
    row = RosterStamp.objects.filter(pk=1).first()
    return row.stamp if row else None


def members_read(queries) -> int:
    return sum(1 for q in queries.captured_queries if "bus_membership" in q["sql"])


@on_sqlite
def test_every_trigger_that_writes_the_stamp_is_in_the_migrated_store():
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        triggers = {name for (name,) in cursor.fetchall()}

    assert {
        "bus_roster_membership_added",
        "bus_roster_membership_removed",
        "bus_roster_membership_changed",
        "bus_roster_seat_changed",
        "bus_roster_agent_renamed",
    } <= triggers


@on_sqlite
def test_a_second_send_to_an_unchanged_room_reads_no_membership(team):
    writer = make_seat("web", team)
    make_seat("api", team)
    send(writer, team, "first?", type="QUESTION", to=["api"])

    with CaptureQueriesContext(connection) as queries:
        report = send(writer, team, "second?", type="QUESTION", to=["api"])

    assert members_read(queries) == 0
    assert len(woken_by(report)) == 1


@on_sqlite
def test_the_stamp_moves_for_a_join_a_part_and_a_quiet_but_not_for_reading_or_liveness(team):
    writer = make_seat("web", team)
    api = make_seat("api", team)
    seen = [stamp()]

    def moved() -> bool:
        seen.append(stamp())
        return seen[-1] != seen[-2]

    send(writer, team, "a fact.")
    services.reading.read_inbox(seat=api, room="team")  # moves api's cursor
    Seat.objects.filter(pk=api.pk).update(last_seen=timezone.now(), live_until=timezone.now())
    assert not moved()

    services.rooms.join_room(seat=api, room=make_room("ops").name)
    assert moved()
    services.rooms.part_room(seat=api, room="ops")
    assert moved()
    services.seats.set_quiet(seat=api, duration="1h")
    assert moved()
    services.seats.set_quiet(seat=api, off=True)
    assert moved()


def test_a_seat_that_joins_after_a_send_is_woken_by_the_next_broadcast_question(team):
    writer = make_seat("web", team)
    make_seat("api", team)
    send(writer, team, "anyone?", type="QUESTION")

    docs = make_seat("docs", team)
    report = send(writer, team, "anyone else?", type="QUESTION")

    assert docs.name in woken_by(report)


def test_a_seat_that_parts_after_a_send_is_not_woken_by_the_next(team):
    writer = make_seat("web", team)
    api = make_seat("api", team)
    assert woken_by(send(writer, team, "port?", type="QUESTION", to=["api"])) == {api.name}

    services.rooms.part_room(seat=api, room="team")
    # Still a name of the room (it was in it), so the send is accepted: it wakes nobody.
    report = send(writer, team, "port now?", type="QUESTION", to=["api"])

    assert woken_by(report) == set()


def test_a_seat_gone_quiet_after_a_send_is_not_woken_by_the_next_and_is_woken_again_after(
    team,
):
    writer = make_seat("web", team)
    api = make_seat("api", team)
    assert woken_by(send(writer, team, "one?", type="QUESTION")) == {api.name}

    services.seats.set_quiet(seat=api, duration="1h")
    quieted = send(writer, team, "two?", type="QUESTION")
    services.seats.set_quiet(seat=api, off=True)
    woken_again = send(writer, team, "three?", type="QUESTION")

    assert woken_by(quieted) == set()
    assert WakeDecision.objects.get(entry_id=quieted["id"]).reason == "quiet"
    assert woken_by(woken_again) == {api.name}


@pytest.mark.django_db(transaction=True)
def test_a_membership_written_by_another_connection_is_seen_by_the_next_send():
    """As another process (a `salon join` in a shell) writes it: behind this process's
    back, on a connection of its own."""
    if connection.vendor != "sqlite":
        pytest.skip("written with sqlite3 here; PostgreSQL keeps no roster")
    team = make_room("team")
    writer = make_seat("web", team)
    make_seat("api", team)
    docs = make_seat("docs")  # in no room yet
    send(writer, team, "anyone?", type="QUESTION")

    other = sqlite3.connect(connection.settings_dict["NAME"], timeout=10)
    try:
        other.execute(
            "INSERT INTO bus_membership (seat_id, room_id, cursor, joined_at) VALUES (?, ?, 0, ?)",
            [docs.pk, team.pk, timezone.now().isoformat(" ")],
        )
        other.commit()
    finally:
        other.close()

    assert docs.name in woken_by(send(writer, team, "anyone else?", type="QUESTION"))


def test_a_join_rolled_back_leaves_no_reader_behind_in_the_kept_roster(team):
    writer = make_seat("web", team)
    make_seat("api", team)
    docs = make_seat("docs")
    send(writer, team, "before?", type="QUESTION")

    class RolledBack(Exception):
        pass

    with pytest.raises(RolledBack), transaction.atomic():
        services.rooms.join_room(seat=docs, room="team")
        assert docs.name in woken_by(send(writer, team, "inside?", type="QUESTION"))
        raise RolledBack

    # Another change after the rollback: a stamp that counted up would now be the one the
    # roster kept inside the rolled-back transaction had.
    ops = make_seat("ops", team)
    report = send(writer, team, "after?", type="QUESTION")

    assert not Membership.objects.filter(seat=docs, room=team).exists()
    assert docs.name not in woken_by(report)
    assert ops.name in woken_by(report)


def test_addressed_sends_decide_as_the_rule_decides_for_every_reader(team):
    """The roster finds an addressed entry's readers by their address keys instead of
    asking decide_wake of each: the rows and counts must be the rule's, for seat names,
    agent names, a remote agent's base name, several sessions of one agent, a quiet seat
    and a parted one."""
    writer = make_seat("web", team)
    api_one, api_two = make_seat("api", team), make_seat("api", team)
    docs = make_seat("docs", team)
    quiet = make_seat("ops", team)
    services.seats.set_quiet(seat=quiet, duration="1h")
    parted = make_seat("old", team)
    services.rooms.part_room(seat=parted, room="team")
    remote = services.seats.remote_seat(
        name="api@macmini#7b02e5d1", room=team, wrote_at=timezone.now()
    )
    current = [api_one, api_two, docs, quiet, remote]
    names = ["api", api_one.name, "docs", "ops", "api@macmini", remote.name]

    for size in (1, 2):
        for to in combinations(names, size):
            report = send(writer, team, "who?", type="QUESTION", to=list(to))
            at = WakeDecision.objects.filter(entry_id=report["id"]).first()
            at = at.decided_at if at else timezone.now()
            facts = rules.EntryFacts(sender_seat=writer.name, type="QUESTION", to=to)
            expected = {}
            for seat in current:
                seat.refresh_from_db()
                expected[seat.name] = rules.decide_wake(facts, seat.facts(), at)
            rows = {
                d.seat_name: (d.woken, d.reason)
                for d in WakeDecision.objects.filter(entry_id=report["id"])
            }
            counts = dict(
                DecisionCount.objects.filter(entry_id=report["id"]).values_list("reason", "count")
            )
            assert rows == {
                name: (d.woken, d.reason)
                for name, d in expected.items()
                if d.woken or d.reason == "quiet"
            }, to
            unwoken = [d.reason for d in expected.values() if not (d.woken or d.reason == "quiet")]
            assert counts == {r: unwoken.count(r) for r in set(unwoken)}, to


def test_a_kept_roster_is_dropped_for_one_read_at_another_stamp(team):
    writer = make_seat("web", team)
    make_seat("api", team)
    first = roster.of_room(team.pk, 1)
    again = roster.of_room(team.pk, 1)
    make_seat("docs", team)
    other = roster.of_room(team.pk, 2)

    assert again is first
    assert {m.agent_name for m in first.current} == {"web", "api"}
    assert {m.agent_name for m in other.current} == {"web", "api", "docs"}
    assert writer.pk in {m.pk for m in other.current}


def test_no_roster_is_kept_without_a_stamp(team):
    make_seat("api", team)
    first = roster.of_room(team.pk, None)
    make_seat("docs", team)

    assert {m.agent_name for m in roster.of_room(team.pk, None).current} == {"api", "docs"}
    assert {m.agent_name for m in first.current} == {"api"}


@on_sqlite
def test_a_store_of_the_version_before_the_stamp_says_to_migrate_and_then_works(tmp_path):
    """An upgrade whose store is not migrated yet: one line naming `salon migrate`, no
    traceback; after it, sends decide over the kept roster as before."""
    from tests.support import drop_store, run_salon, salon_env

    env = salon_env(tmp_path, CLAUDE_CODE_SESSION_ID="3f9c1a20-0000-4000-8000-000000000000")
    try:
        assert run_salon("migrate", "bus", "0009", env=env).returncode == 0
        assert run_salon("rooms", "--create", "team", env=env).returncode == 0

        refused = run_salon("send", "team", "FACT", "hello", env=env)

        assert refused.returncode == 1
        # a missing table or a missing column (a later migration's): either names the fix
        assert "run `salon migrate`" in refused.stderr
        assert "Traceback" not in refused.stderr
        assert run_salon("migrate", env=env).returncode == 0
        api = dict(env, CLAUDE_CODE_SESSION_ID="7b02e5d1-0000-4000-8000-000000000000")
        assert run_salon("join", "team", env=api, cwd=tmp_path).returncode == 0
        sent = run_salon("send", "team", "QUESTION", "port?", "--json", env=env)
        assert sent.returncode == 0, sent.stderr
        assert json.loads(sent.stdout)["wakes"] == [f"{tmp_path.name}#7b02e5d1"]
    finally:
        drop_store(env)
