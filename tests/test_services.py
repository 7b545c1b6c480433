"""bus.services against a real database: each test is one claim of what rooms, entries,
reading and limits promise, judged on the rows written and the values returned."""

from __future__ import annotations

import math
import threading
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from bus import bell, rules, services, wire
from bus.models import Entry, Membership, Room, Seat, Token, WakeDecision
from bus.rules import RuleError
from tests.factories import entry_of, make_room, make_seat, send, session_id, set_liveness

pytestmark = pytest.mark.django_db


@pytest.fixture
def team():
    return make_room("team")


def decisions_of(report: dict) -> dict[str, tuple[bool, str]]:
    return {
        d.seat.name: (d.woken, d.reason)
        for d in WakeDecision.objects.filter(entry_id=report["id"]).select_related("seat")
    }


def cursor_of(seat: Seat, room: Room) -> int:
    return Membership.objects.get(seat=seat, room=room).cursor


def ids(result: dict) -> list[str]:
    return [e["id"] for e in result["entries"]]


# ---------------------------------------------------------------- who is woken


def test_a_broadcast_fact_wakes_nobody_and_its_report_says_so(team):
    writer = make_seat("web", team)
    make_seat("api", team)
    make_seat("docs", team)

    report = send(writer, team, "the build is green.", type="FACT")

    assert report["wakes"] == []
    assert any("wakes nobody" in n and "2 other live seats" in n for n in report["notice"])
    assert decisions_of(report) == {}


@pytest.mark.parametrize("kind", ["QUESTION", "REQUEST"])
def test_a_broadcast_claim_wakes_every_live_seat_of_the_room_except_the_sender(team, kind):
    writer = make_seat("web", team)
    api = make_seat("api", team)
    docs = make_seat("docs", team)
    make_seat("elsewhere", make_room("other"))

    report = send(writer, team, "who owns the schema?", type=kind)

    assert report["wakes"] == sorted([api.name, docs.name])
    assert decisions_of(report) == {api.name: (True, "claim"), docs.name: (True, "claim")}


def test_an_unknown_seat_is_listed_in_wakes(team):
    writer = make_seat("web", team)
    api = make_seat("api", team, liveness=rules.UNKNOWN)

    report = send(writer, team, "anyone?", type="QUESTION")

    assert report["wakes"] == [api.name]


def test_an_entry_to_a_seat_wakes_that_seat_only(team):
    writer = make_seat("web", team)
    api_one = make_seat("api", team)
    make_seat("api", team)
    make_seat("docs", team)

    report = send(writer, team, "your tests fail.", to=[api_one.name])

    assert report["wakes"] == [api_one.name]
    assert decisions_of(report) == {api_one.name: (True, "addressed")}


def test_an_entry_to_an_agent_wakes_all_its_seats(team):
    writer = make_seat("web", team)
    api_one = make_seat("api", team)
    api_two = make_seat("api", team)
    make_seat("docs", team)

    report = send(writer, team, "your tests fail.", to=["api"])

    assert report["wakes"] == sorted([api_one.name, api_two.name])


def test_the_send_tool_takes_a_single_addressee_as_a_string_not_its_letters(team):
    from mcpgate import tools

    writer = make_seat("web", team)
    api = make_seat("api", team)

    class Caller:
        label = "web"
        session_id = ""

        def seat(self, **_):
            return writer

    result = tools.run_tool(
        Caller(), tools.TOOLS["send"], {"text": "ping.", "room": "team", "to": "api"}
    )

    report = result["structuredContent"]
    assert (report["to"], report["wakes"]) == (["api"], [api.name])


def test_an_entry_to_an_agent_reaches_its_remote_seats_by_the_name_without_the_device(team):
    writer = make_seat("web", team)
    [remote] = services.seats.remote_roster(
        room=team, device="macmini", seats=[("api@macmini#7b02e5d1", rules.LIVE)],
        live_for=timedelta(minutes=5),
    )  # fmt: skip

    report = send(writer, team, "ping.", to=["api"])

    # Its own machine decides whether it is woken: the report names it apart.
    assert report["wakes"] == []
    assert report["decidedThere"] == [remote]


def test_a_local_caller_cannot_take_a_name_of_another_machine():
    with pytest.raises(RuleError, match="another machine"):
        services.seats.check_in(agent="api@macmini", session_id=session_id())

    assert not Seat.objects.filter(agent__name="api@macmini").exists()


def test_the_sender_is_never_woken_by_its_own_entry(team):
    writer = make_seat("web", team)
    sibling = make_seat("web", team)

    report = send(writer, team, "note to my agent.", to=["web"])

    assert report["wakes"] == [sibling.name]
    assert writer.name not in decisions_of(report)


def test_an_answer_with_re_wakes_the_one_who_asked_and_nobody_else(team):
    asker = make_seat("web", team)
    answerer = make_seat("api", team)
    make_seat("docs", team)
    question = send(asker, team, "which port?", type="QUESTION")

    answer = send(answerer, team, "9315.", type="ANSWER", re=question["id"])

    assert answer["wakes"] == [asker.name]
    assert decisions_of(answer) == {asker.name: (True, "reply")}


def test_a_quiet_seat_is_not_woken_but_can_read_the_entry(team):
    writer = make_seat("web", team)
    quiet = make_seat("api", team)
    services.seats.set_quiet(seat=quiet, duration="2h")

    report = send(writer, team, "please review.", type="REQUEST")

    assert report["wakes"] == []
    assert decisions_of(report) == {quiet.name: (False, "quiet")}
    inbox = services.reading.read_inbox(seat=quiet, room="team")
    assert ids(inbox) == [report["id"]]
    assert inbox["entries"][0]["wakes"] is False


def test_an_expired_quiet_is_absent(team):
    writer = make_seat("web", team)
    reader = make_seat("api", team)
    Seat.objects.filter(pk=reader.pk).update(
        quiet=True, quiet_until=timezone.now() - timedelta(minutes=1)
    )

    report = send(writer, team, "please review.", type="REQUEST")

    assert report["wakes"] == [reader.name]
    [api] = [a for a in services.seats.agents_projection()["agents"] if a["agent"] == "api"]
    assert api["seats"][0]["quiet"] is False


def test_a_gone_seat_is_not_listed_in_wakes_but_its_decision_is_recorded(team):
    writer = make_seat("web", team)
    gone = make_seat("api", team, liveness=rules.GONE)

    report = send(writer, team, "please review.", type="REQUEST")

    assert report["wakes"] == []
    assert decisions_of(report) == {gone.name: (True, "claim")}


def test_a_parted_seat_is_neither_woken_nor_recorded(team):
    writer = make_seat("web", team)
    parted = make_seat("api", team)
    services.rooms.part_room(seat=parted, room="team")

    report = send(writer, team, "anyone?", type="QUESTION")

    assert report["wakes"] == []
    assert decisions_of(report) == {}


def test_focus_never_changes_who_is_woken(team):
    writer = make_seat("web", team)
    busy = make_seat("api", team)
    services.seats.declare_focus(seat=busy, text="deep in the migration", phase="blocked")

    report = send(writer, team, "anyone?", type="QUESTION")

    assert report["wakes"] == [busy.name]


@pytest.mark.django_db(transaction=True)
def test_the_doorbell_rings_the_woken_seats_only_after_the_entry_is_committed():
    team = make_room("team")
    writer = make_seat("web", team)
    api = make_seat("api", team)
    rung = []

    def ringer(entry_id, seat_ids):
        rung.append((entry_id, seat_ids))

    bell.add_ringer(ringer)
    try:
        with transaction.atomic():
            report = send(writer, team, "anyone?", type="QUESTION")
            before_commit = list(rung)
    finally:
        bell.remove_ringer(ringer)

    assert before_commit == []
    assert rung == [(report["id"], [api.pk])]


# ---------------------------------------------------------------- what send answers


def test_the_send_report_has_the_documented_keys_and_the_server_fills_in_sender_and_time(team):
    writer = make_seat("web", team)
    before = timezone.now()

    report = send(writer, team, "hello.")

    assert set(report) == {"id", "ts", "room", "from", "type", "to", "wakes", "notice"}
    entry = entry_of(report)
    assert (entry.sender, entry.sender_agent, report["from"]) == (writer.name, "web", writer.name)
    assert before - timedelta(milliseconds=1) <= entry.ts <= timezone.now()
    assert entry.ts.microsecond % 1000 == 0
    assert report["ts"].endswith("Z") and len(report["ts"]) == len("2026-01-01T00:00:00.000Z")


def test_meta_source_ts_and_id_are_ignored(team):
    writer = make_seat("web", team)

    report = send(
        writer,
        team,
        "hello.",
        meta={"source": "boss", "from": "boss", "ts": "1999-01-01", "id": "x", "ticket": "T-1"},
    )

    entry = entry_of(report)
    assert entry.meta == {"ticket": "T-1"}
    assert entry.sender == writer.name
    assert entry.ts.year > 1999


def test_an_addressee_with_no_live_seat_is_told_the_entry_waits(team):
    writer = make_seat("web", team)
    make_seat("api", team, liveness=rules.GONE)

    report = send(writer, team, "when you are back: rebase.", to=["api"])

    assert any('"api" has no live session' in n and "waits" in n for n in report["notice"])


def test_a_quiet_addressee_is_named_with_until_when(team):
    writer = make_seat("web", team)
    api = make_seat("api", team)
    services.seats.set_quiet(seat=api, duration="2h")

    report = send(writer, team, "rebase please.", to=["api"])

    assert report["wakes"] == []
    assert any('"api" is quiet until' in n for n in report["notice"])


def test_a_long_entry_is_reported_as_read_in_full_by_every_seat(team, settings):
    settings.LONG_CHARS = 100
    writer = make_seat("web", team)

    report = send(writer, team, "x" * 101)

    assert any("101 characters long (over 100)" in n for n in report["notice"])


def test_an_addressee_whose_seat_is_unknown_is_woken_and_not_told_it_has_no_live_session(team):
    writer = make_seat("web", team)
    api = make_seat("api", team, liveness=rules.UNKNOWN)

    report = send(writer, team, "rebase please.", to=["api"])

    assert report["wakes"] == [api.name]
    assert not any("no live session" in n for n in report["notice"]), report["notice"]
    assert any('"api"' in n and "not known to be live" in n for n in report["notice"])


def test_the_long_entry_notice_says_what_the_inbox_of_a_seat_not_woken_shows(team, settings):
    settings.LONG_CHARS, settings.INBOX_CHARS = 1500, 1200
    writer = make_seat("web", team)
    reader = make_seat("api", team)

    report = send(writer, team, "A sentence of news. " * 100)

    [long] = [n for n in report["notice"] if "characters long" in n]
    assert "every seat in the room reads all of it" not in long
    assert "first 1200 characters" in long and "history" in long
    [shown] = services.reading.read_inbox(seat=reader, room="team")["entries"]
    assert shown["clipped"] == 2000

    woken = send(writer, team, "A sentence for you. " * 100, to=["api"])
    [long] = [n for n in woken["notice"] if "characters long" in n]
    assert "the seats it wakes read all of it" in long


def test_a_caller_without_a_session_writes_as_the_bare_agent_name_and_is_warned(team):
    cron = make_seat("nightly", session=None)

    report = send(cron, team, "backup done.")

    assert report["from"] == "nightly"
    assert "bare agent name" in report["warning"]


# ---------------------------------------------------------------- refusals


def test_a_misspelt_addressee_fails_the_send_and_lists_the_room_names(team):
    writer = make_seat("web", team)
    api = make_seat("api-service", team)

    with pytest.raises(rules.UnknownAddressee) as refused:
        send(writer, team, "hello.", to=["api-servise"])

    assert refused.value.names[0] == "api-service"
    assert set(refused.value.names) == {"web", writer.name, "api-service", api.name}
    assert "api-service" in str(refused.value) and writer.name in str(refused.value)
    assert Entry.objects.count() == 0
    assert Room.objects.get(name="team").last_seq == 0


def test_an_addressee_who_has_parted_the_room_is_still_a_known_name(team):
    writer = make_seat("web", team)
    api = make_seat("api", team)
    services.rooms.part_room(seat=api, room="team")

    report = send(writer, team, "for when you come back.", to=[api.name])

    assert entry_of(report).to == [api.name]


def test_an_alias_is_resolved_and_the_real_name_is_stored(team, settings):
    settings.ALIASES = {"api": "api-service"}
    writer = make_seat("web", team)
    api = make_seat("api-service", team)

    report = send(writer, team, "ping.", to=["api"])

    assert report["to"] == ["api-service"]
    assert entry_of(report).to == ["api-service"]
    assert report["wakes"] == [api.name]


def test_writing_into_a_room_that_does_not_exist_fails_and_lists_the_rooms(team):
    writer = make_seat("web", team)

    with pytest.raises(rules.UnknownRoom) as refused:
        send(writer, "teem", "hello.")

    assert refused.value.rooms == ["salon", "team"]
    assert "salon, team" in str(refused.value) and "--create teem" in str(refused.value)
    assert not Room.objects.filter(name="teem").exists()
    assert Entry.objects.count() == 0


def test_send_with_create_opens_the_room(team):
    writer = make_seat("web", team)

    report = send(writer, "new-room", "first.", create=True)

    assert entry_of(report).room.name == "new-room"


def test_an_unknown_re_is_refused(team):
    writer = make_seat("web", team)

    with pytest.raises(RuleError, match="names no entry of room 'team'"):
        send(writer, team, "re what?", re="0190d9a0-0000-7000-8000-000000000000")

    assert Entry.objects.count() == 0


def test_a_re_naming_an_entry_of_another_room_is_refused(team):
    writer = make_seat("web", team, make_room("other"))
    elsewhere = send(writer, "other", "over there.")

    with pytest.raises(RuleError, match="same room"):
        send(writer, team, "re that.", re=elsewhere["id"])


def test_a_re_may_name_the_earlier_entry_by_its_ts(team):
    asker = make_seat("web", team)
    answerer = make_seat("api", team)
    question = send(asker, team, "which port?", type="QUESTION")

    answer = send(answerer, team, "9315.", type="ANSWER", re=question["ts"])

    assert str(entry_of(answer).re) == question["id"]


@pytest.mark.parametrize(
    ("kwargs", "rule"),
    [
        ({"text": ""}, "content is empty"),
        ({"text": "  \n "}, "content is empty"),
        ({"text": "hi", "type": "NOTE"}, "unknown entry type"),
        ({"text": "x" * (64 * 1024 + 1)}, "over the limit of 65536 bytes"),
        ({"text": "é" * (32 * 1024 + 1)}, "over the limit of 65536 bytes"),
        ({"text": "hi", "meta": ["a"]}, "meta must be a JSON object"),
        ({"text": "hi", "meta": {f"k{i}": i for i in range(33)}}, "over the limit of 32"),
        ({"text": "hi", "meta": {"n": math.nan}}, "not JSON-serializable"),
        ({"text": "hi", "to": ["a b"]}, "addressee name"),
    ],
    ids=[
        "empty",
        "blank",
        "unknown-type",
        "over-64KiB",
        "over-64KiB-in-utf8",
        "meta-not-object",
        "meta-33-keys",
        "meta-nan",
        "bad-addressee-name",
    ],
)
def test_a_bad_entry_is_refused_naming_the_rule_and_nothing_is_stored(team, kwargs, rule):
    writer = make_seat("web", team)

    with pytest.raises(RuleError, match=rule):
        services.entries.send_entry(seat=writer, room="team", **kwargs)

    assert Entry.objects.count() == 0


def test_content_of_exactly_64_kib_is_accepted(team):
    writer = make_seat("web", team)

    report = send(writer, team, "x" * (64 * 1024))

    assert len(entry_of(report).content) == 64 * 1024


def test_the_type_is_case_insensitive_and_stored_upper_case(team):
    writer = make_seat("web", team)

    report = send(writer, team, "hm?", type="question")

    assert entry_of(report).type == "QUESTION"


@pytest.mark.parametrize(
    ("meta", "stored"),
    [(None, "FACT"), ({"kind": "question"}, "QUESTION"), ({"kind": "ack"}, "ANSWER")],
)
def test_a_send_without_a_type_stores_fact_unless_meta_kind_says_otherwise(team, meta, stored):
    writer = make_seat("web", team)

    report = send(writer, team, "hi.", meta=meta)

    assert entry_of(report).type == stored


def test_a_seat_in_several_rooms_writes_into_its_primary_room_when_it_names_none(team):
    """REGRESSION: 2026-12-01 — a seat in two rooms could not send without naming one,
    and the MCP send_message tool had no room argument at all."""
    writer = make_seat("web", make_room("ops"), team)  # joined ops first

    report = services.entries.send_entry(seat=writer, text="hello.")

    assert report["room"] == "ops"


def test_the_primary_room_is_the_next_one_once_the_seat_left_the_first(team):
    ops = make_room("ops")
    writer = make_seat("web", ops, team)
    services.rooms.part_room(seat=writer, room="ops")

    report = services.entries.send_entry(seat=writer, text="hello.")

    assert report["room"] == "team"


def test_a_seat_in_one_room_need_not_name_it(team):
    writer = make_seat("web", team)

    report = services.entries.send_entry(seat=writer, text="hello.")

    assert report["room"] == "team"


def test_a_seat_in_no_room_writes_into_the_default_room():
    cron = make_seat("nightly", session=None)

    report = services.entries.send_entry(seat=cron, text="backup done.")

    assert report["room"] == "salon"


def test_a_non_member_can_write_into_a_room_and_is_not_a_reader_there(team):
    hook = make_seat("ci", session=None)
    reader = make_seat("web", team)

    report = send(hook, team, "deploy failed?", type="QUESTION")

    assert report["wakes"] == [reader.name]
    assert not Membership.objects.filter(seat=hook).exists()


def test_two_entries_in_the_same_millisecond_keep_their_send_order(team, monkeypatch):
    writer = make_seat("web", team)
    reader = make_seat("api", team)
    frozen = timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: frozen)

    first = send(writer, team, "first.")
    second = send(writer, team, "second.")

    assert first["ts"] == second["ts"]
    assert ids(services.reading.read_inbox(seat=reader, room="team")) == [first["id"], second["id"]]
    assert ids(services.reading.read_history(seat=reader, room="team")) == [
        first["id"],
        second["id"],
    ]


def test_entries_of_a_room_are_numbered_in_send_order_without_gaps(team):
    writer = make_seat("web", team)

    seqs = [entry_of(send(writer, team, f"n{i}.")).seq for i in range(3)]

    assert seqs == [1, 2, 3]
    assert Room.objects.get(name="team").last_seq == 3


@pytest.mark.django_db(transaction=True)
def test_concurrent_sends_into_one_room_get_distinct_consecutive_numbers():
    team = make_room("team")
    writers = [make_seat(f"w{i}", team) for i in range(4)]
    failures: list[BaseException] = []

    def write(seat):
        try:
            for n in range(10):
                send(seat, "team", f"{seat.name} {n}.")
        except BaseException as exc:  # reported below; a thread cannot fail the test
            failures.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=write, args=(seat,)) for seat in writers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert failures == []
    seqs = sorted(Entry.objects.filter(room=team).values_list("seq", flat=True))
    assert seqs == list(range(1, 41))
    assert Room.objects.get(pk=team.pk).last_seq == 40
    ordered = Entry.objects.filter(room=team).order_by("seq").values_list("ts", flat=True)
    assert list(ordered) == sorted(ordered)


# ---------------------------------------------------------------- reading


def test_an_entry_addressed_to_another_seat_is_readable_but_neither_for_me_nor_waking(team):
    writer = make_seat("web", team)
    api = make_seat("api", team)
    bystander = make_seat("docs", team)

    report = send(writer, team, "your tests fail.", to=[api.name])

    [entry] = services.reading.read_inbox(seat=bystander, room="team")["entries"]
    assert entry["id"] == report["id"]
    assert (entry["forMe"], entry["wakes"]) == (False, False)


def test_an_entry_for_me_is_marked_for_me_and_waking(team):
    writer = make_seat("web", team)
    api = make_seat("api", team)
    send(writer, team, "your tests fail.", to=["api"])

    [entry] = services.reading.read_inbox(seat=api, room="team")["entries"]

    assert (entry["forMe"], entry["wakes"], entry["sibling"]) == (True, True, False)


def test_an_entry_by_another_seat_of_my_agent_is_marked_sibling(team):
    writer = make_seat("web", team)
    sibling = make_seat("web", team)
    send(writer, team, "I took the migration.")

    [entry] = services.reading.read_inbox(seat=sibling, room="team")["entries"]

    assert entry["sibling"] is True


def test_inbox_moves_the_cursor_only_over_returned_entries_and_more_counts_the_rest(team):
    writer = make_seat("web", team)
    reader = make_seat("api", team)
    sent = [send(writer, team, f"n{i}.")["id"] for i in range(5)]

    first = services.reading.read_inbox(seat=reader, room="team", limit=2)

    assert ids(first) == sent[:2]
    assert (first["more"], first["unread"]) == (3, 5)
    assert cursor_of(reader, Room.objects.get(name="team")) == entry_of({"id": sent[1]}).seq
    assert ids(services.reading.read_inbox(seat=reader, room="team", limit=2)) == sent[2:4]


def test_inbox_leaves_out_own_entries(team):
    writer = make_seat("web", team)
    reader = make_seat("api", team)
    send(reader, team, "mine.")
    theirs = send(writer, team, "theirs.")

    assert ids(services.reading.read_inbox(seat=reader, room="team")) == [theirs["id"]]


def test_peek_never_moves_the_cursor(team):
    writer = make_seat("web", team)
    reader = make_seat("api", team)
    report = send(writer, team, "hello.")

    peeked = services.reading.read_inbox(seat=reader, room="team", advance=False)

    assert ids(peeked) == [report["id"]]
    assert cursor_of(reader, team) == 0


def test_history_never_moves_the_cursor(team):
    writer = make_seat("web", team)
    reader = make_seat("api", team)
    send(writer, team, "hello.")

    services.reading.read_history(seat=reader, room="team")

    assert cursor_of(reader, team) == 0


def test_unread_moves_the_cursor_back_over_the_last_entries_read(team):
    writer = make_seat("web", team)
    reader = make_seat("api", team)
    sent = [send(writer, team, f"n{i}.")["id"] for i in range(3)]
    services.reading.read_inbox(seat=reader, room="team")

    marked = services.reading.mark_unread(seat=reader, room="team", count=2)

    assert marked["markedUnread"] == 2
    assert ids(services.reading.read_inbox(seat=reader, room="team")) == sent[1:]


def test_history_holds_the_last_entries_including_own_oldest_first(team):
    writer = make_seat("web", team)
    reader = make_seat("api", team)
    sent = [send(writer, team, "a.")["id"], send(reader, team, "b.")["id"]]
    sent.append(send(writer, team, "c.")["id"])

    assert ids(services.reading.read_history(seat=reader, room="team", limit=2)) == sent[1:]


def test_history_from_a_name_holds_only_that_writer(team):
    writer = make_seat("web", team)
    reader = make_seat("api", team)
    mine = send(writer, team, "a.")["id"]
    send(reader, team, "b.")

    assert ids(services.reading.read_history(seat=reader, room="team", sender="web")) == [mine]


def test_a_new_seat_gets_its_siblings_last_hour_entries_as_unread_but_not_older_history(team):
    other = make_seat("api", team)
    sibling = make_seat("web", team)
    old = [send(other, team, "old 1.")["id"], send(sibling, team, "old 2.")["id"]]
    Entry.objects.filter(id__in=old).update(ts=timezone.now() - timedelta(hours=2))
    send(other, team, "recent, before the sibling spoke.")
    recent = [send(sibling, team, "recent 1.")["id"], send(other, team, "recent 2.")["id"]]
    services.reading.read_inbox(seat=sibling, room="team")

    newcomer = make_seat("web", team)

    # "recent 2." was read by the sibling: only what the sibling wrote stays unread.
    assert ids(services.reading.read_inbox(seat=newcomer, room="team")) == recent[:1]


def test_a_restarted_seat_does_not_get_back_what_its_sibling_read(team):
    other = make_seat("api", team)
    first = make_seat("web", team)
    mine = send(first, team, "e1: the first session asks the room.")["id"]
    send(other, team, "e2.")
    send(other, team, "e3.")
    send(other, team, "e4: read by the first session.", to=["web"], type="QUESTION")
    services.reading.read_inbox(seat=first, room="team")

    restarted = make_seat("web", team)
    peek = services.reading.read_inbox(seat=restarted, room="team", advance=False)

    assert ids(peek) == [mine]
    assert (peek["unread"], peek["unreadForMe"], peek["unreadWaking"]) == (1, 1, 0)
    assert services.reading.unread_counts(seat=restarted)[0]["unread"] == 1
    later = send(other, team, "e5: new to both.")["id"]
    assert ids(services.reading.read_inbox(seat=restarted, room="team", limit=1)) == [mine]
    assert ids(services.reading.read_inbox(seat=restarted, room="team")) == [later]
    assert ids(services.reading.read_inbox(seat=restarted, room="team")) == []


def test_a_new_seat_inherits_its_siblings_position_when_they_wrote_nothing_lately(team):
    other = make_seat("api", team)
    sibling = make_seat("web", team)
    send(other, team, "read by the sibling.")
    services.reading.read_inbox(seat=sibling, room="team")
    later = send(other, team, "not yet read by anyone of web.")

    newcomer = make_seat("web", team)

    assert ids(services.reading.read_inbox(seat=newcomer, room="team")) == [later["id"]]


def test_with_no_sibling_everything_in_the_room_is_unread(team):
    writer = make_seat("api", team)
    sent = [send(writer, team, f"n{i}.")["id"] for i in range(3)]
    Entry.objects.filter(id=sent[0]).update(ts=timezone.now() - timedelta(days=30))

    newcomer = make_seat("web", team)

    assert ids(services.reading.read_inbox(seat=newcomer, room="team")) == sent


def test_a_new_seat_keeps_unread_what_a_sibling_wrote_without_being_a_member(team):
    other = make_seat("api", team)
    sibling = make_seat("web", team)
    send(other, team, "read by the sibling.")
    services.reading.read_inbox(seat=sibling, room="team")
    by_cron = send(make_seat("web", session=None), team, "nightly build of web is red.")
    services.reading.read_inbox(seat=sibling, room="team")

    newcomer = make_seat("web", team)

    assert ids(services.reading.read_inbox(seat=newcomer, room="team")) == [by_cron["id"]]


LONG = ("This is a sentence of the entry. " * 10 + "\n\n") * 5


def test_a_long_non_waking_entry_is_clipped_at_a_sentence_or_paragraph_break(team, settings):
    settings.INBOX_CHARS = 100
    writer = make_seat("web", team)
    reader = make_seat("api", team)
    send(writer, team, LONG, type="FACT")

    [entry] = services.reading.read_inbox(seat=reader, room="team")["entries"]

    kept, _, tail = entry["content"].partition(" … +")
    assert kept.endswith("entry.") and len(kept) <= 100
    assert tail == f"{len(LONG) - len(kept)} characters — history for the whole entry"
    assert entry["clipped"] == len(LONG)


def test_a_long_waking_entry_is_never_clipped(team, settings):
    settings.INBOX_CHARS = 100
    writer = make_seat("web", team)
    reader = make_seat("api", team)
    send(writer, team, LONG, type="QUESTION")

    [entry] = services.reading.read_inbox(seat=reader, room="team")["entries"]

    assert entry["content"] == LONG
    assert "clipped" not in entry


def test_history_is_never_clipped(team, settings):
    settings.INBOX_CHARS = 100
    writer = make_seat("web", team)
    reader = make_seat("api", team)
    send(writer, team, LONG, type="FACT")

    [entry] = services.reading.read_history(seat=reader, room="team")["entries"]

    assert entry["content"] == LONG


def test_unread_counts_split_unread_for_me_and_waking(team):
    writer = make_seat("web", team)
    reader = make_seat("api", team)
    send(writer, team, "fyi.")
    send(writer, team, "to docs.", to=[make_seat("docs", team).name])
    send(writer, team, "to you.", to=["api"])
    send(writer, team, "anyone?", type="QUESTION")

    [counts] = services.reading.unread_counts(seat=reader)

    assert counts == {
        "room": "team",
        "unread": 4,
        "unreadForMe": 3,
        "unreadWaking": 2,
        "countsCapped": False,
    }


def test_reading_a_room_the_seat_is_not_in_is_refused_listing_its_rooms(team):
    outsider = make_seat("web", make_room("ops"))

    with pytest.raises(rules.NotAMember, match=r"\(its rooms: ops\); join it first"):
        services.reading.read_inbox(seat=outsider, room="team")
    with pytest.raises(rules.NotAMember, match=r"\(its rooms: ops\)"):
        services.reading.read_history(seat=outsider, room="team")


def test_an_inbox_that_names_no_room_reads_every_room_oldest_first_each_entry_naming_its_room(
    team,
):
    ops = make_room("ops")
    writer = make_seat("web", team, ops)
    reader = make_seat("api", team, ops)
    send(writer, team, "one.")
    send(writer, ops, "two.")
    send(writer, team, "three.")

    inbox = services.reading.read_inbox(seat=reader, limit=2)

    assert [(e["room"], e["content"]) for e in inbox["entries"]] == [
        ("team", "one."),
        ("ops", "two."),
    ]
    assert (inbox["room"], inbox["rooms"], inbox["unread"], inbox["more"]) == (
        None,
        ["team", "ops"],
        3,
        1,
    )
    again = services.reading.read_inbox(seat=reader)
    assert [e["content"] for e in again["entries"]] == ["three."]  # cursors moved per room


def test_a_history_that_names_no_room_covers_every_room_of_the_seat(team):
    ops = make_room("ops")
    writer = make_seat("web", team, ops)
    send(writer, team, "one.")
    send(writer, ops, "two.")

    history = services.reading.read_history(seat=writer)

    assert [(e["room"], e["content"]) for e in history["entries"]] == [
        ("team", "one."),
        ("ops", "two."),
    ]


def in_one_instant(team, monkeypatch):
    """Room ops beside team, and seats web (the writer) and api in both; every entry sent
    from now on is stamped with one and the same instant."""
    ops = make_room("ops")
    writer, reader = make_seat("web", team, ops), make_seat("api", team, ops)
    one_instant = timezone.now()
    monkeypatch.setattr(services.entries.timezone, "now", lambda: one_instant)
    return ops, writer, reader


def test_a_history_over_rooms_keeps_entries_of_one_millisecond_in_the_order_written(
    team, monkeypatch
):
    """REGRESSION: 2026-12-01, a flaky run of the test above: entries of one millisecond
    in two rooms were ordered by their per-room seq, which says nothing across rooms."""
    ops, writer, _ = in_one_instant(team, monkeypatch)
    send(writer, team, "first.")
    send(writer, team, "second.")
    send(writer, ops, "third.")

    history = services.reading.read_history(seat=writer)

    assert [e["content"] for e in history["entries"]] == ["first.", "second.", "third."]


def test_an_inbox_over_rooms_keeps_entries_of_one_millisecond_in_the_order_written(
    team, monkeypatch
):
    """REGRESSION: 2026-12-02, a CI run on a fast host: an inbox over two rooms ordered
    entries of one millisecond by room name ("ops" before "team"), not as written."""
    ops, writer, reader = in_one_instant(team, monkeypatch)
    send(writer, team, "first.")
    send(writer, ops, "second.")
    send(writer, team, "third.")
    send(writer, ops, "fourth.")

    first = services.reading.read_inbox(seat=reader, limit=3)
    rest = services.reading.read_inbox(seat=reader)

    assert [e["content"] for e in first["entries"]] == ["first.", "second.", "third."]
    assert [e["content"] for e in rest["entries"]] == ["fourth."]  # each cursor moved just so


def test_a_long_backlog_is_counted_up_to_a_cap_and_says_so(team, monkeypatch):
    monkeypatch.setattr(services.reading, "COUNT_CAP", 3)
    writer = make_seat("web", team)
    reader = make_seat("api", team)
    for n in range(5):
        send(writer, team, f"q{n}?", type="QUESTION")

    inbox = services.reading.read_inbox(seat=reader, room="team", limit=2, advance=False)

    assert (inbox["unread"], inbox["unreadWaking"], inbox["countsCapped"]) == (3, 3, True)
    assert len(inbox["entries"]) == 2


def test_every_face_of_a_capped_count_says_it_is_bounded(team, monkeypatch):
    """The counts stop at a cap: the SessionStart context, the inbox (CLI and the MCP
    tool's `waiting`) and a Stop block each show such a count as a lower bound."""
    import io
    from types import SimpleNamespace

    from bus.management.verbs import Output
    from bus.management.verbs.messages import Inbox
    from mcpgate.claude import hooks
    from mcpgate.claude.hookinput import HookContext

    monkeypatch.setattr(services.reading, "COUNT_CAP", 3)
    monkeypatch.setattr(hooks, "TOLD_AT_ONCE", 2)
    writer, reader = make_seat("web", team), make_seat("api", team)
    for n in range(5):
        send(writer, team, f"q{n}?", type="QUESTION")

    inbox = services.reading.read_inbox(seat=reader, room="team", limit=1, advance=False)
    assert (inbox["more"], inbox["countsCapped"], inbox["waiting"]) == (2, True, "2+ more unread")
    shown = io.StringIO()
    Inbox().show(inbox, SimpleNamespace(json=False), Output(stdout=shown))
    assert "(2+ more unread in team: run `salon inbox team` again)" in shown.getvalue()
    counts = services.reading.unread_counts(seat=reader)
    assert hooks._unread_line(counts) == "Unread: team 3+ (3+ waking you)."
    ctx = HookContext(
        kind="stop", payload={}, agent="api", session=reader.session_id, cwd="/tmp",
        headless=False, store="test", sqlite_path=None,
    )  # fmt: skip
    reason = hooks.stop(reader, ctx)["reason"]
    assert f"2+ entries on the bus are claims on you ({reader.name})" in reason
    # The peek told q0; this block tells the last two: an exact count again.
    reason = hooks.stop(reader, ctx)["reason"]
    assert f"agent-salon: 2 entries on the bus are claims on you ({reader.name})" in reason
    assert hooks.stop(reader, ctx) is None


# ---------------------------------------------------------------- focus, quiet


def test_an_unknown_phase_is_refused_listing_the_five(team):
    seat = make_seat("web", team)

    with pytest.raises(RuleError, match="explore, plan, apply, verify, blocked"):
        services.seats.declare_focus(seat=seat, text="the parser", phase="coding")


def test_a_phase_alone_re_declares_the_standing_sentence(team):
    seat = make_seat("web", team)
    services.seats.declare_focus(seat=seat, text="the parser", files=["p.py"], phase="plan")

    focus = services.seats.declare_focus(seat=seat, phase="apply")["focus"]

    assert (focus["text"], focus["files"], focus["phase"]) == ("the parser", ["p.py"], "apply")


def test_files_given_as_one_comma_separated_string_are_a_list_of_files(team):
    seat = make_seat("web", team)

    focus = services.seats.declare_focus(seat=seat, text="the parser", files="a.py, b.py")["focus"]

    assert focus["files"] == ["a.py", "b.py"]


def test_a_phase_alone_with_no_sentence_is_refused(team):
    seat = make_seat("web", team)

    with pytest.raises(RuleError, match="no focus to re-declare"):
        services.seats.declare_focus(seat=seat, phase="apply")


def test_a_new_sentence_drops_the_old_phase(team):
    seat = make_seat("web", team)
    services.seats.declare_focus(seat=seat, text="the parser", phase="verify")

    focus = services.seats.declare_focus(seat=seat, text="the lexer")["focus"]

    assert (focus["text"], focus["phase"]) == ("the lexer", None)


def test_a_focus_older_than_four_hours_is_stale_but_still_reported(team):
    seat = make_seat("web", team)
    services.seats.declare_focus(seat=seat, text="the parser")
    Seat.objects.filter(pk=seat.pk).update(focus_ts=timezone.now() - timedelta(hours=4, minutes=1))

    focus = services.seats.declare_focus(seat=seat)["focus"]

    assert (focus["text"], focus["stale"]) == ("the parser", True)
    assert services.seats.agents_projection()["agents"][0]["seats"][0]["focus"]["stale"] is True


def test_a_fresh_focus_is_not_stale(team):
    seat = make_seat("web", team)

    focus = services.seats.declare_focus(seat=seat, text="the parser")["focus"]

    assert focus["stale"] is False


def test_an_empty_sentence_clears_the_focus(team):
    seat = make_seat("web", team)
    services.seats.declare_focus(seat=seat, text="the parser", phase="plan")

    cleared = services.seats.declare_focus(seat=seat, text="")

    assert cleared["focus"] is None
    assert services.seats.declare_focus(seat=seat)["focus"] is None


def test_quiet_for_a_while_reports_until_when_and_off_ends_it(team):
    seat = make_seat("web", team)

    quiet = services.seats.set_quiet(seat=seat, duration="90m")
    off = services.seats.set_quiet(seat=seat, off=True)

    assert quiet["quiet"] is True
    assert quiet["quietUntil"] > wire.iso(timezone.now() + timedelta(minutes=89))
    assert (off["quiet"], off["quietUntil"]) == (False, None)


def test_a_quiet_with_no_expiry_shows_quiet_with_no_until_in_agents(team):
    seat = make_seat("web", team)
    services.seats.set_quiet(seat=seat)

    [shown] = services.seats.agents_projection()["agents"][0]["seats"]

    assert (shown["quiet"], shown["quietUntil"]) == (True, None)


# ---------------------------------------------------------------- agents, liveness

AGENTS_TOP = {"schema", "generatedAt", "agents"}
AGENT_KEYS = {"agent", "host", "rooms", "lastSeen", "silentMinutes", "seats"}
SEAT_KEYS = {
    "seat",
    "session",
    "liveness",
    "lastSeen",
    "lastWrote",
    "quiet",
    "quietUntil",
    "focus",
    "claims",
    "client",
    "idleWake",
}
FOCUS_KEYS = {"text", "files", "phase", "ts", "stale"}
CLAIM_KEYS = {"path", "kind", "note", "since", "until", "ageMinutes", "seat", "repo"}


def test_the_agents_projection_has_exactly_the_pinned_key_set(team):
    seat = make_seat("web", team)
    make_seat("api", team)
    services.seats.declare_focus(seat=seat, text="the parser", files=["p.py"], phase="plan")
    services.claims.claim(seat=seat, repo="/src/web/.git", paths=["p.py"])

    projection = services.seats.agents_projection()

    assert set(projection) == AGENTS_TOP
    assert projection["schema"] == "salon.agents/1"
    for agent in projection["agents"]:
        assert set(agent) == AGENT_KEYS
        for shown in agent["seats"]:
            assert set(shown) == SEAT_KEYS
    web = next(a for a in projection["agents"] if a["agent"] == "web")
    assert set(web["seats"][0]["focus"]) == FOCUS_KEYS
    assert [set(claim) for claim in web["seats"][0]["claims"]] == [CLAIM_KEYS]


def test_the_agents_projection_lists_each_agent_with_its_rooms_and_seats(team):
    one = make_seat("web", team)
    two = make_seat("web", make_room("ops"))
    make_seat("api", team)

    web = next(a for a in services.seats.agents_projection()["agents"] if a["agent"] == "web")

    assert web["rooms"] == ["ops", "team"]
    assert [s["seat"] for s in web["seats"]] == sorted([one.name, two.name])


@pytest.mark.parametrize(
    ("last_seen_ago", "stream_open", "liveness"),
    [
        (timedelta(seconds=30), False, "live"),
        (timedelta(minutes=2), False, "live"),
        (timedelta(minutes=3), False, "unknown"),
        (timedelta(minutes=29), False, "unknown"),
        (timedelta(minutes=30), False, "gone"),
        (timedelta(days=3), True, "live"),
    ],
    ids=["30s", "2min", "3min", "29min", "30min", "open-stream"],
)
def test_liveness_crosses_from_live_to_unknown_to_gone(team, last_seen_ago, stream_open, liveness):
    seat = make_seat("web", team)
    at = timezone.now()
    Seat.objects.filter(pk=seat.pk).update(
        last_seen=at - last_seen_ago, live_until=at + timedelta(seconds=30) if stream_open else None
    )

    [shown] = services.seats.agents_projection(at=at)["agents"][0]["seats"]

    assert shown["liveness"] == liveness


def test_keep_live_makes_a_seat_live_and_end_live_lets_it_fall_back(team):
    seat = make_seat("web", team, liveness=rules.GONE)

    services.seats.keep_live(seat=seat)
    live = Seat.objects.get(pk=seat.pk).liveness(timezone.now())
    services.seats.end_live(seat=seat)
    Seat.objects.filter(pk=seat.pk).update(last_seen=timezone.now() - timedelta(minutes=10))

    assert (live, Seat.objects.get(pk=seat.pk).liveness(timezone.now())) == ("live", "unknown")


def test_touch_with_a_minimum_interval_writes_at_most_that_often(team):
    seat = make_seat("web", team)

    assert services.seats.touch(seat=seat, min_interval=timedelta(minutes=1)) is False
    Seat.objects.filter(pk=seat.pk).update(last_seen=timezone.now() - timedelta(minutes=2))
    assert services.seats.touch(seat=seat, min_interval=timedelta(minutes=1)) is True


def test_silent_minutes_counts_from_the_agents_last_write(team):
    seat = make_seat("web", team)
    send(seat, team, "hello.")
    Seat.objects.filter(pk=seat.pk).update(last_wrote=timezone.now() - timedelta(minutes=42))

    [web] = services.seats.agents_projection()["agents"]

    assert web["silentMinutes"] == 42


# ---------------------------------------------------------------- rooms


def test_archive_is_refused_while_a_live_seat_is_in_the_room(team):
    seat = make_seat("web", team)

    with pytest.raises(RuleError, match=f"live seats \\({seat.name}\\).*--force"):
        services.rooms.archive_room(name="team")

    assert Room.objects.get(name="team").archived_at is None


def test_archive_with_force_retires_a_room_with_live_seats(team):
    make_seat("web", team)

    services.rooms.archive_room(name="team", force=True)

    assert Room.objects.get(name="team").archived_at is not None


def test_a_room_with_only_gone_seats_can_be_archived(team):
    make_seat("web", team, liveness=rules.GONE)

    result = services.rooms.archive_room(name="team")

    assert result["room"] == "team"


def test_an_archived_room_is_hidden_from_list_rooms_and_shown_by_archived(team):
    services.rooms.archive_room(name="team")

    assert [r["room"] for r in services.rooms.list_rooms()] == ["salon"]
    assert [r["room"] for r in services.rooms.list_rooms(archived=True)] == ["team"]


def test_an_archived_room_refuses_send_and_inbox(team):
    seat = make_seat("web", team)
    services.rooms.archive_room(name="team", force=True)

    with pytest.raises(rules.UnknownRoom):
        send(seat, team, "hello.")
    with pytest.raises(rules.UnknownRoom):
        services.reading.read_inbox(seat=seat, room="team")


def test_archiving_keeps_every_entry(team):
    writer = make_seat("web", team)
    sent = {send(writer, team, f"n{i}.")["id"] for i in range(3)}
    set_liveness(writer, rules.GONE)

    result = services.rooms.archive_room(name="team")

    assert result["entriesKept"] == 3
    assert set(map(str, Entry.objects.values_list("id", flat=True))) == sent


def test_restore_brings_an_archived_room_back_with_its_entries(team):
    reader = make_seat("api", team)
    writer = make_seat("web", team)
    report = send(writer, team, "before the archive.")
    services.rooms.archive_room(name="team", force=True)

    services.rooms.restore_room(name="team")

    assert "team" in [r["room"] for r in services.rooms.list_rooms()]
    assert ids(services.reading.read_inbox(seat=reader, room="team")) == [report["id"]]


def test_the_default_room_cannot_be_archived():
    with pytest.raises(RuleError, match="default room"):
        services.rooms.archive_room(name="salon", force=True)

    assert Room.objects.get(name="salon").archived_at is None


def test_creating_an_archived_room_is_refused_pointing_to_restore(team):
    services.rooms.archive_room(name="team")

    with pytest.raises(RuleError, match="--restore team"):
        services.rooms.create_room(name="team")


def test_list_rooms_counts_entries_seats_and_live_seats(team):
    writer = make_seat("web", team)
    gone = make_seat("api", team, liveness=rules.GONE)
    send(writer, team, "one.")
    send(writer, team, "two.")

    [listed] = [r for r in services.rooms.list_rooms() if r["room"] == "team"]

    assert listed["entries"] == 2
    assert listed["seats"] == sorted([writer.name, gone.name])
    assert listed["live"] == [writer.name]


def test_list_rooms_lists_a_seat_in_each_of_its_rooms_and_not_where_it_left(team):
    ops = make_room("ops")
    both = make_seat("web", team, ops)
    leaver = make_seat("api", team, ops)
    services.rooms.part_room(seat=leaver, room="ops")

    listed = {r["room"]: r for r in services.rooms.list_rooms()}

    assert listed["team"]["seats"] == sorted([both.name, leaver.name])
    assert listed["ops"]["seats"] == [both.name]
    assert listed["ops"]["live"] == [both.name]


@pytest.mark.parametrize("name", ["", "a b", "x" * 65, "a..b", "room/1"])
def test_a_bad_room_name_is_refused_before_storage(name):
    with pytest.raises(RuleError, match="room name"):
        services.rooms.create_room(name=name)

    assert list(Room.objects.values_list("name", flat=True)) == ["salon"]


# ---------------------------------------------------------------- join / part


def test_part_keeps_the_membership_row_with_left_at(team):
    seat = make_seat("web", team)

    services.rooms.part_room(seat=seat, room="team")

    membership = Membership.objects.get(seat=seat, room=team)
    assert membership.left_at is not None
    assert services.rooms.seat_rooms(seat) == []


def test_join_of_a_missing_room_fails_listing_the_rooms(team):
    seat = make_seat("web")

    with pytest.raises(rules.UnknownRoom, match="rooms: salon, team"):
        services.rooms.join_room(seat=seat, room="teem")


def test_join_with_create_makes_the_room(team):
    seat = make_seat("web")

    joined = services.rooms.join_room(seat=seat, room="fresh", create=True)

    assert joined == {"room": "fresh", "seat": seat.name, "created": True}
    assert services.rooms.seat_rooms(seat) == ["fresh"]


def test_check_in_with_join_defaults_adds_the_callers_default_rooms_once(team):
    sid = session_id()

    seat = services.seats.check_in(
        agent="web", session_id=sid, default_rooms=["team"], join_defaults=True
    )
    again = services.seats.check_in(
        agent="web", session_id=sid, default_rooms=["team"], join_defaults=True
    )

    assert again.pk == seat.pk
    assert services.rooms.seat_rooms(seat) == ["team"]
    assert Membership.objects.filter(seat=seat).count() == 1


def test_default_rooms_are_never_re_added_after_a_part(team):
    sid = session_id()
    seat = services.seats.check_in(
        agent="web", session_id=sid, default_rooms=["team"], join_defaults=True
    )
    services.rooms.part_room(seat=seat, room="team")

    services.seats.check_in(agent="web", session_id=sid, default_rooms=["team"], join_defaults=True)

    assert services.rooms.seat_rooms(seat) == []


def test_a_new_seat_with_no_configured_rooms_joins_its_siblings_rooms(team):
    make_seat("web", team)

    seat = services.seats.check_in(agent="web", session_id=session_id(), join_defaults=True)

    assert services.rooms.seat_rooms(seat) == ["team"]


def test_the_first_seat_of_an_agent_with_no_configured_rooms_joins_the_default_room():
    seat = services.seats.check_in(agent="web", session_id=session_id(), join_defaults=True)

    assert services.rooms.seat_rooms(seat) == ["salon"]


def test_the_processes_own_agent_salon_room_is_never_a_default_for_another_caller(team, settings):
    """REGRESSION: 2026-12-01 — a daemon started with AGENT_SALON_ROOM=ops put every
    HTTP session's seat in ops; a caller's default rooms are its own, never the process's."""
    settings.AGENT_ROOMS = ["team"]

    seat = services.seats.check_in(agent="web", session_id=session_id(), join_defaults=True)

    assert services.rooms.seat_rooms(seat) == ["salon"]


def test_a_seat_is_named_by_the_first_8_characters_of_its_session():
    seat = services.seats.check_in(agent="web", session_id="3f9c1a20-aaaa-bbbb")

    assert seat.name == "web#3f9c1a20"


def test_a_second_session_with_the_same_first_8_characters_gets_a_longer_seat_name():
    first = services.seats.check_in(agent="web", session_id="3f9c1a20-aaaa-bbbb")
    second = services.seats.check_in(agent="web", session_id="3f9c1a20-cccc-dddd")

    assert (first.name, second.name) == ("web#3f9c1a20", "web#3f9c1a20-ccc")


def test_an_agent_name_holding_a_hash_is_refused():
    with pytest.raises(RuleError, match="separates the agent"):
        services.seats.check_in(agent="web#1")

    assert not Seat.objects.exists()


# ---------------------------------------------------------------- prune


def test_prune_forgets_seats_gone_and_silent_for_days_and_never_an_entry(team):
    old = make_seat("web", team)
    send(old, team, "long ago.")
    long_ago = timezone.now() - timedelta(days=8)
    Seat.objects.filter(pk=old.pk).update(last_seen=long_ago, last_wrote=long_ago)
    kept = make_seat("api", team, liveness=rules.GONE)

    result = services.seats.prune(days=7)

    assert result["seats"] == [old.name]
    assert list(Seat.objects.values_list("name", flat=True)) == [kept.name]
    assert Entry.objects.get().sender == old.name


def test_prune_dry_run_writes_nothing(team):
    old = make_seat("web", team)
    long_ago = timezone.now() - timedelta(days=8)
    Seat.objects.filter(pk=old.pk).update(last_seen=long_ago)

    result = services.seats.prune(days=7, dry_run=True)

    assert (result["seats"], result["dryRun"]) == ([old.name], True)
    assert Seat.objects.filter(pk=old.pk).exists()
    assert Membership.objects.filter(seat=old).exists()


def test_prune_keeps_a_seat_with_an_open_stream(team):
    seat = make_seat("web", team)
    long_ago = timezone.now() - timedelta(days=8)
    Seat.objects.filter(pk=seat.pk).update(
        last_seen=long_ago, live_until=timezone.now() + timedelta(seconds=30)
    )

    assert services.seats.prune(days=7)["seats"] == []


# ---------------------------------------------------------------- signatures


@pytest.mark.parametrize("path", ["inbox", "peek", "history"])
def test_a_row_altered_outside_the_bus_reads_as_tampered(team, path):
    writer = make_seat("web", team)
    reader = make_seat("api", team)
    report = send(writer, team, "deploy at noon.")
    Entry.objects.filter(id=report["id"]).update(content="deploy now.")

    if path == "history":
        result = services.reading.read_history(seat=reader, room="team")
    else:
        result = services.reading.read_inbox(seat=reader, room="team", advance=path == "inbox")

    [entry] = result["entries"]
    assert (entry["tampered"], entry["content"], result["tampered"]) == (True, "deploy now.", 1)


def test_an_untouched_entry_reads_as_not_tampered(team):
    writer = make_seat("web", team)
    reader = make_seat("api", team)
    send(
        writer,
        team,
        'ünïcode, emoji 🎉, quotes " and a\r\nCRLF.',
        to=["api"],
        meta={"n": 1, "f": 0.1, "nested": {"b": [1, "x", None, True]}, "é": "ü"},
    )

    [entry] = services.reading.read_history(seat=reader, room="team")["entries"]

    assert entry["tampered"] is False


@pytest.mark.parametrize("number", [1.0, 1e20, 1.5e300, -0.0, 2**70, 1e-7, 123456.789], ids=repr)
def test_numbers_in_meta_read_back_as_not_tampered(team, number):
    writer = make_seat("web", team)
    send(writer, team, "with a number.", meta={"n": number, "list": [number]})

    [entry] = services.reading.read_history(seat=writer, room="team")["entries"]

    assert entry["tampered"] is False


def test_content_holding_a_nul_character_is_refused_naming_the_rule(team):
    writer = make_seat("web", team)

    with pytest.raises(RuleError, match="NUL"):
        send(writer, team, "a\x00b")

    assert Entry.objects.count() == 0


def test_meta_holding_a_nul_character_is_refused_naming_the_rule(team):
    writer = make_seat("web", team)

    with pytest.raises(RuleError, match="NUL"):
        send(writer, team, "hi.", meta={"k": "a\x00b"})

    assert Entry.objects.count() == 0


# ---------------------------------------------------------------- tokens


def test_a_label_with_no_token_needs_none():
    assert services.tokens.token_problem(label="web", token=None) is None


def test_a_label_with_a_token_refuses_a_call_without_one():
    services.tokens.issue_token(label="web")

    problem = services.tokens.token_problem(label="web", token=None)

    assert "needs a bearer token" in problem and "salon token issue web" in problem


def test_a_label_with_a_token_refuses_a_wrong_one():
    services.tokens.issue_token(label="web")

    problem = services.tokens.token_problem(label="web", token="salon_wrong")

    assert "not valid for label 'web'" in problem


def test_a_label_with_a_token_accepts_the_right_one():
    token = services.tokens.issue_token(label="web")

    assert services.tokens.token_problem(label="web", token=token) is None


def test_a_token_of_another_label_is_refused():
    services.tokens.issue_token(label="web")
    other = services.tokens.issue_token(label="api")

    assert services.tokens.token_problem(label="web", token=other) is not None


def test_a_revoked_token_is_refused_once_a_new_one_is_issued():
    old = services.tokens.issue_token(label="web")
    assert services.tokens.revoke_tokens(label="web") == 1
    new = services.tokens.issue_token(label="web")

    assert services.tokens.token_problem(label="web", token=old) is not None
    assert services.tokens.token_problem(label="web", token=new) is None


def test_require_tokens_requires_one_for_any_label(settings):
    settings.REQUIRE_TOKENS = True

    assert "needs a bearer token" in services.tokens.token_problem(label="web", token=None)


def test_require_tokens_refuses_a_caller_without_a_label_saying_how_to_fix_it(settings):
    settings.REQUIRE_TOKENS = True

    assert "?label=" in services.tokens.token_problem(label=None, token="salon_anything")


def test_tokens_are_stored_hashed_and_listed_by_label():
    token = services.tokens.issue_token(label="web")
    services.tokens.issue_token(label="web")

    assert not Token.objects.filter(token_hash__contains=token[6:]).exists()
    assert [(t["label"], t["tokens"]) for t in services.tokens.list_tokens()] == [("web", 2)]


# ---------------------------------------------------------------- cost


def _plan(queryset) -> str:
    return queryset.explain()


def _sqlite_index_on(table: str, columns: list[str]) -> str:
    """The name SQLite gave the index on exactly `columns` (a UniqueConstraint declared in
    CREATE TABLE becomes `sqlite_autoindex_<table>_N`, not its Django name)."""
    with connection.cursor() as cursor:
        for row in cursor.execute(f"PRAGMA index_list('{table}')").fetchall():
            name = row[1]
            info = cursor.execute(f"PRAGMA index_info('{name}')").fetchall()
            if [c[2] for c in sorted(info)] == columns:
                return name
    raise AssertionError(f"no index on {table}({', '.join(columns)})")


def test_the_inbox_query_uses_the_room_seq_index(team):
    """The inbox reads `room = R AND seq > cursor ORDER BY seq LIMIT n` through the unique
    index behind entry_room_seq, so its cost follows the entries returned, not the room.

    Enough rows (two rooms, 3000 entries) and ANALYZE give the planner real statistics: on a
    near-empty table PostgreSQL rightly prefers a sequential scan, which says nothing."""
    reader = make_seat("api", team)
    other = make_room("other")
    at = timezone.now()
    Entry.objects.bulk_create(
        Entry(
            room=room,
            seq=seq,
            ts=at,
            sender="web",
            sender_agent="web",
            type="FACT",
            content="x",
            via="cli",
            signature="-",
        )
        for room in (team, other)
        for seq in range(1, 1501)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    query = services.reading._after_cursor(reader, team, 1400)[:20]

    plan = _plan(query)

    if connection.vendor == "postgresql":
        assert "Index Scan" in plan and "entry_room_seq" in plan, plan
    else:
        assert f"USING INDEX {_sqlite_index_on('bus_entry', ['room_id', 'seq'])}" in plan, plan
        assert "USE TEMP B-TREE" not in plan, plan


def test_a_new_seat_of_any_kind_inherits_its_siblings_position(team):
    """REGRESSION: 2026-12-01 — a new seat was reported to start behind its sibling; a
    new HTTP session's seat, a hook's and a command's all start where the agent read."""
    from django.utils import timezone as clock

    from mcpgate import sessions
    from mcpgate.models import McpSession

    other = make_seat("api", team)
    sibling = make_seat("web", team)
    for n in range(3):
        send(other, team, f"n{n}.")
    services.reading.read_inbox(seat=sibling, room="team")
    later = send(other, team, "after the sibling read.")
    session = McpSession.objects.create(
        id="f" * 32, label="web", protocol_version="2025-06-18", last_active_at=clock.now()
    )

    over_http = sessions.bind_seat(session).seat
    by_hook = services.seats.check_in(
        agent="web", session_id=session_id(), default_rooms=[], join_defaults=True
    )

    for newcomer in (over_http, by_hook):
        assert ids(services.reading.read_inbox(seat=newcomer, room="team")) == [later["id"]]


def test_the_send_roster_reads_a_seat_as_the_orm_does():
    """bus.services.roster reads the room's seats with raw SQL (no model instances): the
    values the wake decisions see must be the ORM's, datetimes aware and equal."""
    from bus.services import roster

    room = make_room("roster")
    seat = make_seat("reader", room)
    parted = make_seat("parted", room)
    at = timezone.now().replace(microsecond=123456)
    Seat.objects.filter(pk=seat.pk).update(
        quiet=True,
        quiet_until=at + timedelta(hours=1),
        live_until=at + timedelta(seconds=45),
        last_seen=at,
        signed_off_at=at - timedelta(days=1),
        hook_seen_at=at - timedelta(minutes=3),
    )
    services.rooms.part_room(seat=parted, room="roster")
    seat.refresh_from_db()

    members = {m.name: m for m in roster.of_room(room.pk, None).members}
    [reader] = roster.readers([members[seat.name]])

    assert (reader.pk, reader.agent_name, reader.quiet, reader.current) == (
        seat.pk,
        "reader",
        True,
        True,
    )
    for column in ("quiet_until", "live_until", "last_seen", "signed_off_at", "hook_seen_at"):
        assert getattr(reader, column) == getattr(seat, column), column
        assert getattr(reader, column).tzinfo is not None
    assert reader.liveness(at) == seat.liveness(at)
    assert reader.listener(at, reader.liveness(at)) == seat.listener(at, seat.liveness(at))
    assert reader.facts() == seat.facts()
    assert members[parted.name].current is False


# -- mcpgate.sessions.load_session: the select_related query, compiled once ---------------


def _columns(obj) -> dict:
    return {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields}


def test_load_session_gives_what_the_orm_gives_with_the_seat_and_agent_in_one_query():
    from django.test.utils import CaptureQueriesContext

    from mcpgate import sessions
    from mcpgate.models import McpSession

    seat = make_seat("loaded", make_room("team"))
    now = timezone.now()
    McpSession.objects.create(id="with-seat", label="loaded", protocol_version="2025-06-18",
                              rooms=["team"], client_info={"name": "c", "version": "1"},
                              last_active_at=now, seat=seat)  # fmt: skip
    McpSession.objects.create(id="no-seat", protocol_version="2025-06-18", last_active_at=now)
    McpSession.objects.create(id="ended", protocol_version="2025-06-18", last_active_at=now,
                              ended_at=now)  # fmt: skip
    expected = McpSession.objects.select_related("seat__agent").get(id="with-seat")

    with CaptureQueriesContext(connection) as queries:
        loaded = sessions.load_session("with-seat")
        bare = sessions.load_session("no-seat")
        assert (loaded.seat.name, loaded.seat.agent.name, bare.seat) == (
            seat.name,
            "loaded",
            None,
        )
    assert len(queries.captured_queries) == 2  # one each; the seat and agent came along
    assert _columns(loaded) == _columns(expected)
    assert _columns(loaded.seat) == _columns(expected.seat)
    assert _columns(loaded.seat.agent) == _columns(expected.seat.agent)
    assert (bare.rooms, bare.client_info, bare.label) == ([], {}, "")
    assert sessions.load_session("ended") is None
    assert sessions.load_session("never-made") is None


def test_a_compiled_lookup_gives_the_orms_entries_with_their_rooms_for_any_number_of_keys(
    monkeypatch,
):
    import uuid

    from django.test.utils import CaptureQueriesContext

    from patches import django as compiled

    room, other = make_room("team"), make_room("ops")
    seat = make_seat("writer", room, other)
    ids = [uuid.UUID(send(seat, r, f"n{n}", meta={"k": n})["id"]) for n, r in
           enumerate([room, other, room])]  # fmt: skip
    lookup = compiled.CompiledLookup(Entry, "id", "room")
    expected = Entry.objects.select_related("room").in_bulk(ids)

    for keys in ([ids[0]], ids, [ids[2].hex, uuid.uuid4(), ids[1]]):  # hex: as SQLite rows give
        with CaptureQueriesContext(connection) as queries:
            found = {entry.pk: entry for entry in lookup.fetch(keys)}
            rooms = {pk: entry.room.name for pk, entry in found.items()}
        assert len(queries.captured_queries) == 1  # the room came along
        wanted = [k if isinstance(k, uuid.UUID) else uuid.UUID(k) for k in keys]
        assert sorted(found) == sorted(k for k in wanted if k in expected)
        for pk, entry in found.items():
            assert _columns(entry) == _columns(expected[pk])
            assert rooms[pk] == expected[pk].room.name
    monkeypatch.setattr(compiled, "MAX_SHAPES", 2)  # more keys: through the ORM, same result
    assert {e.pk: e.room.name for e in lookup.fetch(ids)} == {
        pk: e.room.name for pk, e in expected.items()
    }
    assert lookup.fetch([]) == []


def test_a_compiled_insert_stores_what_the_orm_would_for_any_number_of_rows(monkeypatch):
    from bus.models import DecisionCount
    from patches import django as compiled

    room = make_room("team")
    seat = make_seat("writer", room)
    source = entry_of(send(seat, room, "first", meta={"k": "v"}, type="QUESTION"))
    now = timezone.now().replace(microsecond=123000)
    entry = Entry(room=room, seq=99, ts=now, sender=seat.name, sender_agent="writer",
                  type="FACT", to=["a", "b"], re=source.id, content="é\\u2028x",
                  meta={"n": 1, "nested": {"x": [1, 2]}}, via="mcp", signature="s")  # fmt: skip
    compiled.CompiledInsert(Entry).insert([entry])
    stored = Entry.objects.get(pk=entry.pk)
    assert _columns(stored) == _columns(entry)
    assert not entry._state.adding

    counts = compiled.CompiledInsert(DecisionCount)
    for n in (1, 3, 40):  # 40: more rows than one statement takes, in several
        if n == 40:
            monkeypatch.setattr(compiled, "MAX_SHAPES", 8)
        rows = [DecisionCount(entry=entry, room=room, reason=f"r{n}-{i}", count=i + 1,
                              decided_at=now) for i in range(n)]  # fmt: skip
        counts.insert(rows)
        stored = {
            row.reason: (row.entry_id, row.room_id, row.count, row.decided_at)
            for row in DecisionCount.objects.filter(reason__startswith=f"r{n}-")
        }
        assert stored == {row.reason: (entry.pk, room.pk, row.count, now) for row in rows}


def test_a_compiled_insert_hands_the_database_the_values_the_orm_prepares():
    """Values of the exact type a column writes unchanged are passed as they are; every
    other value (a bool in an int column, a str in a bool column, a datetime, JSON, a
    UUID, a foreign key) through the ORM: the parameters are the ORM's, value for value."""
    from django.db import connection
    from django.db.models.sql import InsertQuery

    from patches import django as compiled

    room = make_room("team")
    seat = make_seat("writer", room)
    source = entry_of(send(seat, room, "first", type="QUESTION"))
    now = timezone.now()
    rows = [
        WakeDecision(entry_id=source.id, seat_id=seat.pk, seat_name="x", room_id=room.pk,
                     seq=3, woken=True, reason="addressed", decided_at=now, listener="live",
                     push_seq=None, told_by=""),
        WakeDecision(entry_id=source.id, seat_id=None, seat_name="", room_id=room.pk,
                     seq=True, woken=1, reason="quiet", decided_at=now, listener="",
                     push_seq=7, pushed_at=now),
    ]  # fmt: skip
    insert = compiled.CompiledInsert(WakeDecision)
    for row in rows:  # one row a statement: the shape every backend compiles
        shape = compiled._InsertShape.compile(insert, connection, [row])
        query = InsertQuery(WakeDecision)
        query.insert_values(insert.fields, [row], raw=False)
        orm = query.get_compiler(connection=connection)

        expected = [orm.prepare_value(f, orm.pre_save_val(f, row)) for f in insert.fields]
        assert shape.params([row]) == expected
        assert [type(v) for v in shape.params([row])] == [type(v) for v in expected]


@pytest.mark.django_db
def test_the_embedded_stores_cursor_converts_placeholders_as_djangos_does_run_after_run():
    """salon.sqlite keeps each statement's converted text: the same statement, run again,
    still gets its own parameters, and a literal %% stays a percent sign."""
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("the embedded store's backend: the SQLite pass")
    sql = "SELECT '%%s' || %s, %s"
    with connection.cursor() as cursor:
        cursor.execute(sql, ["a", 1])
        first = cursor.fetchone()
        cursor.execute(sql, ["b", 2])
        second = cursor.fetchone()
    assert (first, second) == (("%sa", 1), ("%sb", 2))
    assert type(connections["default"]).__module__ == "salon.sqlite.base"


def test_a_send_writes_no_index_that_a_unique_constraint_already_covers():
    """Every index is one more B-tree each send writes: a foreign key that a unique
    constraint starts with has no index of its own (migration 0011)."""
    from django.db import connection

    from bus.models import DecisionCount

    with connection.cursor() as cursor:
        for model in (Entry, WakeDecision, DecisionCount):
            table = model._meta.db_table
            constraints = connection.introspection.get_constraints(cursor, table)
            leading = [c["columns"][0] for c in constraints.values() if c["unique"]]
            for name, c in constraints.items():
                if c["index"] and not c["unique"] and len(c["columns"]) == 1:
                    assert c["columns"][0] not in leading, f"{table}.{name} duplicates a unique"


def test_an_update_by_ids_writes_the_orms_values_to_exactly_those_rows_past_a_chunk(
    monkeypatch,
):
    from bus import compiled

    room = make_room("team")
    seats = [make_seat(f"s{n}", room) for n in range(7)]
    untouched = Seat.objects.get(pk=seats[-1].pk)
    at = timezone.now().replace(microsecond=654321)
    monkeypatch.setattr(compiled, "ID_CHUNK", 2)  # 6 ids: three statements

    compiled.update_by_ids(Seat, [s.pk for s in seats[:6]], last_seen=at, quiet=True)

    for seat in seats[:6]:
        seat.refresh_from_db()
        assert (seat.last_seen, seat.quiet) == (at, True)
    seats[-1].refresh_from_db()
    assert (seats[-1].last_seen, seats[-1].quiet) == (untouched.last_seen, False)
