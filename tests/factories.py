"""factory-boy factories: defaults only; tests state what matters to their claim.

Seats and entries are made through bus.services (the only writer), so a test's rows
are the rows the bus itself would have written; the helpers below only add defaults.
"""

from __future__ import annotations

import itertools
from datetime import timedelta

import factory
from django.utils import timezone

from bus import rules, services
from bus.models import Agent, Entry, Room, Seat

_sessions = itertools.count(1)


class RoomFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Room
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"room-{n}")


class AgentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Agent
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"agent-{n}")


def session_id() -> str:
    """A fresh session id whose first 8 characters differ from every other one."""
    return f"{next(_sessions):08x}-0000-4000-8000-000000000000"


def make_room(name: str | None = None) -> Room:
    return services.rooms.create_room(name=name or RoomFactory.build().name)[0]


def set_liveness(seat: Seat, liveness: str) -> Seat:
    """Give a seat the evidence behind `live`, `unknown` or `gone`."""
    at = timezone.now()
    last_seen = {
        rules.LIVE: at,
        rules.UNKNOWN: at - timedelta(minutes=10),
        rules.GONE: at - timedelta(hours=2),
    }[liveness]
    Seat.objects.filter(pk=seat.pk).update(last_seen=last_seen, live_until=None)
    seat.last_seen, seat.live_until = last_seen, None
    return seat


def make_seat(
    agent: str,
    *rooms: Room | str,
    session: str | None = "new",
    liveness: str = rules.LIVE,
) -> Seat:
    """A seat of `agent` (a fresh session unless given; None = the bare agent name),
    member of `rooms`, with the liveness asked for."""
    seat = services.seats.check_in(
        agent=agent, session_id=session_id() if session == "new" else session
    )
    for room in rooms:
        services.rooms.join_room(seat=seat, room=room if isinstance(room, str) else room.name)
    return set_liveness(seat, liveness)


def send(seat: Seat, room: Room | str, text: str = "a note.", **kwargs) -> dict:
    """send_entry with defaults: the room named, a FACT unless `type` says otherwise."""
    name = room if isinstance(room, str) else room.name
    return services.entries.send_entry(seat=seat, room=name, text=text, **kwargs)


def entry_of(report: dict) -> Entry:
    return Entry.objects.get(id=report["id"])
