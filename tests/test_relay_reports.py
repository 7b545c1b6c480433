"""What one machine says of the seats of another (docs/RELAY.md, "Names across
machines"): a sender's report leaves their waking to their own machine, a webhook
writer of elsewhere is a writer here and not a member, the stats do not count their
wake-ups as untold, and a remote seat's focus, carried by its roster, is shown here and
given to the letterbox."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bus import rules, services, stats
from bus.ids import uuid7
from bus.models import Membership, Seat, WakeDecision
from bus.services import triage
from tests.factories import make_room, make_seat, send

pytestmark = pytest.mark.django_db

HOLD = timedelta(minutes=6)
REMOTE = "web-app@desktop#b2b2b2b2"


def roster(room, *seats, device: str = "desktop", focus=None) -> None:
    services.seats.remote_roster(room=room, device=device, seats=list(seats), live_for=HOLD,
                                 focus=focus)  # fmt: skip


def land(room: str = "team", **fields) -> dict | None:
    values = {"id": uuid7(), "room": room, "ts": datetime.now(UTC), "sender": REMOTE,
              "type": "FACT", "to": [], "re": None, "content": "a note", "meta": {}}  # fmt: skip
    values.update(fields)
    return services.entries.land_entry(**values)


def test_a_remote_seat_is_reported_as_decided_there_never_as_woken_or_quiet():
    team = make_room("team")
    roster(team, (REMOTE, "live"), ("docs@desktop#c3c3c3c3", "gone"))
    api = make_seat("api", team)
    local = make_seat("web-app", team)

    asked = send(api, team, "which port?", type="QUESTION", to=["web-app@desktop"])
    assert (asked["wakes"], asked["decidedThere"]) == ([], [REMOTE])
    assert asked["notice"] == []  # nothing said of its liveness or quiet: desktop knows
    # Its decision is kept here too (its own machine is the one that tells it).
    assert WakeDecision.objects.filter(entry_id=asked["id"], seat_name=REMOTE).exists()

    gone = send(api, team, "and you?", type="QUESTION", to=["docs@desktop#c3c3c3c3"])
    assert gone["decidedThere"] == ["docs@desktop#c3c3c3c3"]
    assert not any("no live session" in n for n in gone["notice"])

    everyone = send(api, team, "who is around?", type="QUESTION")
    assert everyone["wakes"] == [local.name]
    assert everyone["decidedThere"] == ["docs@desktop#c3c3c3c3", REMOTE]
    assert "decidedThere" not in send(api, team, "a local fact")


def test_the_live_flow_shows_remote_seats_as_decided_there_as_send_reports_them():
    """REGRESSION: the operator's live flow read remote seats from the ledger and listed
    a live one under "wakes" and a gone one under "waiting", which `send` never says."""
    from bus import live
    from bus.management.commands.watch import format_line

    team = make_room("team")
    roster(team, (REMOTE, "live"), ("docs@desktop#c3c3c3c3", "gone"))
    api = make_seat("api", team)
    local = make_seat("web-app", team)
    start = live.positions()

    everyone = send(api, team, "who is around?", type="QUESTION")
    land(type="QUESTION", content="from desktop, for everyone")  # decided here for local seats

    asked, landed = (item.data for item in live.after(start))
    assert (asked["wakes"], asked["decidedThere"]) == (everyone["wakes"], everyone["decidedThere"])
    assert asked["decidedThere"] == ["docs@desktop#c3c3c3c3", REMOTE]
    assert (asked["waiting"], asked["quieted"]) == ([], [])
    assert landed["wakes"] == sorted([api.name, local.name])
    assert (landed["decidedThere"], landed["waiting"]) == (["docs@desktop#c3c3c3c3"], [])
    line = format_line(asked)
    assert f"(wakes {local.name}) (decided there: docs@desktop#c3c3c3c3, {REMOTE}):" in line


def test_the_send_command_shows_remote_seats_as_decided_there():
    from bus.management.verbs.messages import Send

    lines = []

    class Out:
        def say(self, text):
            lines.append(text)

        note = say

    report = {"type": "QUESTION", "to": ["web-app"], "room": "team", "from": "api#1", "id": "x",
              "wakes": ["web-app#2"], "decidedThere": [REMOTE], "notice": []}  # fmt: skip
    Send().show(report, type("O", (), {"json": False})(), Out())
    assert f"wakes: web-app#2, {REMOTE} (decided there)" in lines[0]


def test_a_webhook_writer_of_another_machine_is_a_writer_here_not_a_member():
    team = make_room("team")
    api = make_seat("api", team)

    land(sender="bench@laptop", content="nightly build: green")

    writer = Seat.objects.get(name="bench@laptop")
    assert writer.remote
    assert not Membership.objects.current().filter(seat=writer).exists()
    report = send(api, team, "anyone?", type="QUESTION")
    assert "bench@laptop" not in report["wakes"] + report.get("decidedThere", [])
    with pytest.raises(rules.UnknownAddressee):
        send(api, team, "hello", to=["bench@laptop"])
    # A session of that machine that writes is a member, as before.
    land(sender="ci@laptop#d4d4d4d4")
    assert Membership.objects.current().filter(seat__name="ci@laptop#d4d4d4d4").exists()


def test_stats_do_not_count_a_remote_seats_wake_ups_as_untold():
    team = make_room("team")
    roster(team, (REMOTE, "live"))
    api = make_seat("api", team)

    send(api, team, "which port?", type="QUESTION", to=[REMOTE])

    row = WakeDecision.objects.get(seat_name=REMOTE)
    assert row.woken and row.told_at is None
    [room] = stats.report()["rooms"]
    wake = room["wakeUps"]
    assert (wake["decided"], wake["notTold"], wake["reachedNoSession"]) == (0, 0, 0)
    assert room["decisions"]["byReason"]["addressed"] == 1  # the decision itself counts
    assert stats.timeline()["reachedNoSession"] == [0] * len(stats.timeline()["buckets"])


def test_a_remote_seats_focus_crosses_in_its_roster_and_the_letterbox_judges_with_it():
    team = make_room("team")
    focus = {"text": "fixing the login form", "files": ["web/login.tsx"], "phase": "apply",
             "ts": "2026-12-03T10:00:00.000Z"}  # fmt: skip
    roster(team, (REMOTE, "live"), focus={REMOTE: focus})

    [agent] = [
        a for a in services.seats.agents_projection()["agents"] if a["agent"] == "web-app@desktop"
    ]
    shown = agent["seats"][0]["focus"]
    assert (shown["text"], shown["files"], shown["phase"]) == (
        "fixing the login form",
        ["web/login.tsx"],
        "apply",
    )

    # An entry of that seat, judged here for a local seat: the judge reads what its
    # writer is on.
    api = make_seat("api", team)
    landed = land(type="QUESTION", to=["api"], content="does the login API take JSON?")
    from bus.models import Entry

    entry = Entry.objects.select_related("room").get(id=landed["id"])
    document = triage.document("letterbox", api, entry, woken=True, reason="addressed")
    assert document["entry"]["fromFocus"] == {
        "text": "fixing the login form",
        "files": ["web/login.tsx"],
        "phase": "apply",
    }

    roster(team, (REMOTE, "live"))  # a roster of before focus crossed: the focus stays
    assert Seat.objects.get(name=REMOTE).focus_text == "fixing the login form"
    roster(team, (REMOTE, "live"), focus={REMOTE: None})  # the seat dropped its focus
    assert Seat.objects.get(name=REMOTE).focus_text == ""
    with pytest.raises(rules.RuleError):
        roster(team, (REMOTE, "live"), focus={REMOTE: {**focus, "phase": "napping"}})
