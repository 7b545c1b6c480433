"""The salon_status tool's neighbour list against a real database."""

from __future__ import annotations

import pytest

from bus import services
from mcpgate import tools
from tests.factories import make_room, make_seat

pytestmark = pytest.mark.django_db


def status_of(seat):
    return tools.salon_status(seat=seat, label="", protocol_version="2025-11-25", base_url=None)


def test_salon_status_lists_every_neighbour_with_its_rooms(django_assert_max_num_queries):
    team, ops, quiet = make_room("team"), make_room("ops"), make_room("quiet")
    me = make_seat("web-app", team)
    others = [make_seat(f"agent-{i:02d}", *([team, ops] if i % 2 else [team])) for i in range(40)]
    services.rooms.join_room(seat=others[0], room="quiet")
    with django_assert_max_num_queries(6):  # not one per neighbour
        status = status_of(me)
    listed = {row["seat"]: row["rooms"] for row in status["seats"]}
    assert set(listed) == {me.name, *(o.name for o in others)}
    assert listed[me.name] == ["team"]
    assert listed[others[0].name] == ["quiet", "team"]
    assert listed[others[1].name] == ["ops", "team"]
    assert quiet.name not in status["session"]["rooms"]
