"""bus.admin.filters.EntryFilter on its own (no HTML): one claim per filter, on SQLite and on
PostgreSQL alike (the `to` filters compare against the JSON text of a list)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.http import QueryDict
from django.utils import timezone

from bus import services
from bus.admin.filters import EntryFilter
from bus.models import Entry
from tests.factories import RoomFactory

pytestmark = pytest.mark.django_db

T0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def talk(monkeypatch):
    """Six entries, one minute apart from T0, in rooms team and ops:

    e1 web-app#aaaa1111 → api            team QUESTION  "Who owns the LOGIN bug?"
    e2 api#bbbb2222 → web-app#aaaa1111   team ANSWER    "I do"  (re e1)
    e3 ci (broadcast)                    team FACT      "build 812 is green"
    e4 web-app#cccc3333 → api#bbbb2222   ops  REQUEST   "rotate the keys"
    e5 api#bbbb2222 → web-app            ops  FACT      "keys rotated"
    e6 ci → api-gateway                  team FACT      "gateway restarted"
    """
    clock = {"at": T0}
    monkeypatch.setattr(timezone, "now", lambda: clock["at"])
    RoomFactory(name="team")
    RoomFactory(name="ops")
    seats = {}
    for agent, session, rooms in (
        ("web-app", "aaaa1111", ["team"]),
        ("web-app", "cccc3333", ["ops"]),
        ("api", "bbbb2222", ["team", "ops"]),
        ("api-gateway", "dddd4444", ["team"]),
    ):
        seat = services.seats.check_in(agent=agent, session_id=session)
        for room in rooms:
            services.rooms.join_room(seat=seat, room=room)
        seats[seat.name] = seat
    seats["ci"] = services.seats.check_in(agent="ci")
    ids = {}

    def send(key, seat, room, type, to, text, re=None):
        report = services.entries.send_entry(
            seat=seats[seat], text=text, room=room, type=type, to=to, re=re
        )
        ids[key] = report["id"]
        clock["at"] += timedelta(minutes=1)

    send("e1", "web-app#aaaa1111", "team", "QUESTION", ["api"], "Who owns the LOGIN bug?")
    send("e2", "api#bbbb2222", "team", "ANSWER", ["web-app#aaaa1111"], "I do", re=ids["e1"])
    send("e3", "ci", "team", "FACT", [], "build 812 is green")
    send("e4", "web-app#cccc3333", "ops", "REQUEST", ["api#bbbb2222"], "rotate the keys")
    send("e5", "api#bbbb2222", "ops", "FACT", ["web-app"], "keys rotated")
    send("e6", "ci", "team", "FACT", ["api-gateway"], "gateway restarted")
    return {str(v): k for k, v in ids.items()}


def found(talk, **params) -> list[str]:
    """The entry keys (e1…) the filter selects, oldest first."""
    data = QueryDict(mutable=True)
    data.update(params)
    entries = EntryFilter(data, queryset=Entry.objects.order_by("ts")).qs
    return [talk[str(e.id)] for e in entries]


def errors(**params) -> dict:
    data = QueryDict(mutable=True)
    data.update(params)
    fs = EntryFilter(data, queryset=Entry.objects.all())
    assert not fs.is_valid()
    return fs.errors


def test_no_filter_selects_everything(talk):
    assert found(talk) == ["e1", "e2", "e3", "e4", "e5", "e6"]


def test_room_selects_the_entries_of_one_room(talk):
    assert found(talk, room="ops") == ["e4", "e5"]


def test_an_unknown_room_is_an_error_not_an_empty_list(talk):
    assert "room" in errors(room="nope")


def test_type_is_case_insensitive(talk):
    assert found(talk, type="question") == ["e1"]
    assert found(talk, type="FACT") == ["e3", "e5", "e6"]


def test_an_unknown_type_is_an_error(talk):
    assert "type" in errors(type="SHOUT")


def test_source_as_an_agent_selects_every_seat_of_it(talk):
    assert found(talk, source="web-app") == ["e1", "e4"]


def test_source_as_a_seat_selects_that_seat_only(talk):
    assert found(talk, source="web-app#aaaa1111") == ["e1"]


def test_source_as_a_bare_seat(talk):
    assert found(talk, source="ci") == ["e3", "e6"]


def test_target_as_an_agent_matches_the_agent_and_its_seats_not_a_longer_name(talk):
    # e6 is addressed to api-gateway: "api" must not match it.
    assert found(talk, target="api") == ["e1", "e4"]


def test_target_as_a_seat_matches_that_seat_only(talk):
    assert found(talk, target="api#bbbb2222") == ["e4"]


def test_target_with_a_longer_name(talk):
    assert found(talk, target="api-gateway") == ["e6"]


def test_target_is_not_a_substring_match(talk):
    assert found(talk, target="web") == []
    assert found(talk, target="app") == []


def test_participant_selects_either_side(talk):
    assert found(talk, participant="api") == ["e1", "e2", "e4", "e5"]


def test_between_selects_the_conversation_in_both_directions(talk):
    assert found(talk, between="web-app,api") == ["e1", "e2", "e4", "e5"]
    assert found(talk, between="api,web-app") == ["e1", "e2", "e4", "e5"]


def test_between_two_seats_is_exactly_their_exchange(talk):
    assert found(talk, between="web-app#aaaa1111,api#bbbb2222") == ["e2"]


def test_between_needs_two_names(talk):
    assert "between" in errors(between="web-app")


def test_exclude_leaves_out_a_list_of_senders(talk):
    assert found(talk, exclude="ci") == ["e1", "e2", "e4", "e5"]
    assert found(talk, exclude="ci, api") == ["e1", "e4"]


def test_exclude_by_seat(talk):
    assert found(talk, exclude="web-app#cccc3333,ci") == ["e1", "e2", "e5"]


def test_since_is_inclusive_and_takes_iso_with_z(talk):
    assert found(talk, since="2025-06-01T12:03:00Z") == ["e4", "e5", "e6"]


def test_until_is_inclusive(talk):
    assert found(talk, until="2025-06-01T12:01:00Z") == ["e1", "e2"]


def test_a_time_range_with_an_offset(talk):
    # 14:01+02:00 is 12:01 UTC.
    assert found(talk, since="2025-06-01T14:01+02:00", until="2025-06-01T14:03+02:00") == [
        "e2",
        "e3",
        "e4",
    ]


def test_a_time_without_an_offset_is_utc(talk):
    assert found(talk, since="2025-06-01 12:05") == ["e6"]


def test_a_date_alone_covers_the_whole_day(talk):
    assert found(talk, since="2025-06-01", until="2025-06-01") == [
        "e1",
        "e2",
        "e3",
        "e4",
        "e5",
        "e6",
    ]
    assert found(talk, until="2025-05-31") == []
    assert found(talk, since="2025-06-02") == []


def test_a_time_that_is_not_iso_is_an_error_saying_how_to_write_it(talk):
    problems = errors(since="yesterday")
    assert "ISO 8601" in problems["since"][0]


def test_free_text_is_case_insensitive_in_the_content(talk):
    # (in the order of relevance, not oldest first: sorted here)
    assert found(talk, q="login") == ["e1"]
    assert sorted(found(talk, q="KEYS")) == ["e4", "e5"]


def test_free_text_treats_like_wildcards_literally(talk):
    assert found(talk, q="%") == []
    assert found(talk, q="_") == []


def test_a_name_with_characters_outside_the_rules_is_an_error(talk):
    assert "source" in errors(source="web app")
    assert "target" in errors(target='"]')


def test_filters_combine(talk):
    assert found(talk, room="team", source="ci", target="api-gateway") == ["e6"]
    assert found(talk, participant="api", type="FACT", since="2025-06-01T12:04Z") == ["e5"]


# ---------------------------------------------------------------- query plans


def plan(**params) -> str:
    """The database's plan for the admin list's rows query under these filters."""
    data = QueryDict(mutable=True)
    data.update(params)
    queryset = EntryFilter(data, queryset=Entry.objects.order_by("-ts", "-id")).qs[:50]
    sql, args = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # A test table is tiny: make the planner show which index it can use.
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("EXPLAIN " + sql, args)
        else:
            cursor.execute("EXPLAIN QUERY PLAN " + sql, args)
        return "\n".join(str(row[-1]) for row in cursor.fetchall())


@pytest.mark.parametrize(
    ("params", "index"),
    [
        ({"source": "web-app"}, "entry_by_sender_agent"),
        ({"source": "web-app#aaaa1111"}, "entry_by_sender"),
        ({"source": "web-app", "since": "2025-06-01T12:00Z"}, "entry_by_sender_agent"),
        ({"between": "web-app,api"}, "entry_addressed_by_agent"),
    ],
)
def test_the_sender_filters_are_served_by_an_index(talk, params, index):
    assert index in plan(**params)


def test_a_time_range_alone_is_served_by_the_newest_first_index(talk):
    assert "entry_newest_first" in plan(since="2025-06-01T12:00Z", until="2025-06-02")
