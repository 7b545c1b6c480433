"""The ledger's predicates (bus.ledger) and their ORM forms (bus.models) give one answer,
and the Stop hook's fast path, which asks the store with sqlite3 and no Django, gives the
services' answer on the same store."""

from __future__ import annotations

import pytest
from django.db import connection

from bus import ledger, services
from bus.models import Entry, Membership, WakeDecision
from mcpgate.claude.hookinput import HookContext, _sqlite_nothing_to_do
from tests.factories import make_room, make_seat, send


def test_the_ledger_names_the_tables_django_made():
    assert Membership._meta.db_table == ledger.MEMBERSHIP
    assert WakeDecision._meta.db_table == ledger.WAKE
    assert Entry._meta.db_table == ledger.ENTRY


def _a_store_with_every_kind_of_row() -> dict:
    """Seats, each with one kind of ledger state, written through the services."""
    team, side = make_room("team"), make_room("side")
    writer = make_seat("web", team, side)
    seats = {
        "told": make_seat("api", team),
        "pushed": make_seat("docs", team),
        "untold": make_seat("ops", team),
        "left": make_seat("qa", team, side),
        "quiet": make_seat("pm", team),
        "read": make_seat("ux", team),
        "untold in one of two rooms": make_seat("db", team, side),
        "in no room": make_seat("idle"),
    }
    services.seats.set_quiet(seat=seats["quiet"], duration="1h")
    send(writer, team, "who owns the schema?", type="QUESTION")
    send(writer, side, "and the side door?", type="QUESTION")
    services.telling.tell(seat=seats["told"], by="wait")
    services.telling.tell(seat=seats["left"], by="wait", room_names=["team"])
    services.telling.tell(seat=seats["untold in one of two rooms"], by="wait", room_names=["team"])
    services.rooms.part_room(seat=seats["left"], room="side")
    # A cursor moved past the entry, as a read does; the row itself is left untold.
    Membership.objects.filter(seat=seats["read"]).update(cursor=team.entries.count())
    [(_, pushed)] = services.telling.claim_pushes(seat=seats["pushed"])[0]
    assert pushed.content == "who owns the schema?"
    return seats


NOTHING_UNTOLD = {
    "told": True,
    "pushed": False,  # a push is a hint, not a telling
    "untold": False,
    "left": True,  # its untold row is in a room it left
    "quiet": True,  # quieted: the row does not wake it
    "read": True,
    "untold in one of two rooms": False,
    "in no room": True,
}


@pytest.mark.django_db(transaction=True)
def test_the_stop_hook_s_fast_path_and_the_services_agree_on_what_is_untold():
    if connection.vendor != "sqlite":
        pytest.skip("the fast path reads a SQLite store")
    seats = _a_store_with_every_kind_of_row()

    def fast_path_says(seat) -> bool:
        ctx = HookContext(
            kind="stop", payload={}, agent=seat.agent.name, session=seat.session_id,
            cwd="/tmp", headless=False, store="test", sqlite_path=connection.settings_dict["NAME"],
        )  # fmt: skip
        return _sqlite_nothing_to_do(ctx)

    fast = {kind: fast_path_says(seat) for kind, seat in seats.items()}
    daemon = {kind: not services.telling.anything_untold(seat=seat) for kind, seat in seats.items()}

    assert fast == daemon == NOTHING_UNTOLD


@pytest.mark.django_db
def test_the_orm_verbs_and_the_sql_predicates_pick_the_same_rows():
    seats = _a_store_with_every_kind_of_row()

    def by_sql(where: str, table: str, alias: str) -> set[int]:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {alias}.id FROM {table} {alias} WHERE {where}")
            return {row[0] for row in cursor.fetchall()}

    assert by_sql(ledger.current("m"), ledger.MEMBERSHIP, "m") == set(
        Membership.objects.current().values_list("pk", flat=True)
    )
    assert by_sql(ledger.untold("w"), ledger.WAKE, "w") == set(
        WakeDecision.objects.untold().values_list("pk", flat=True)
    )
    assert by_sql(ledger.pending("w"), ledger.WAKE, "w") == set(
        WakeDecision.objects.untold().filter(push_seq__isnull=True).values_list("pk", flat=True)
    )
    # The push claimers' rows: only the seats with an untold row never pushed, in a room
    # they are still in.
    pending = {
        kind for kind, seat in seats.items() if services.telling._anything_pending([seat.pk])
    }
    assert pending == {"untold", "untold in one of two rooms"}
