"""The relay's parts in one process: the sealing, the names as they cross, the invites,
and landing through bus.services (docs/RELAY.md). The real processes are tests/test_relay.py."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from bus import rules, services, signing
from bus.ids import uuid7
from bus.models import Entry, Membership, Seat, WakeDecision
from relay import crypto, envelope
from tests.factories import make_room, make_seat, send

KEY = bytes(range(32))
ROUTING = {"id": "01a2311115db7000a97b8ca6b9d59755", "room": "team",
           "sender": "api@laptop#a5a5a5a5", "ts": "2026-12-01T10:05:33.019Z"}  # fmt: skip
BODY = {"type": "FACT", "to": [], "re": None, "content": "the build is green", "meta": {}}


# ---------------------------------------------------------------- sealing


def test_a_sealed_entry_opens_with_its_own_id_room_sender_and_time():
    nonce, ciphertext = crypto.seal(KEY, BODY, **ROUTING)

    assert crypto.open_sealed(KEY, nonce, ciphertext, **ROUTING) == BODY
    assert "the build is green" not in ciphertext


@pytest.mark.parametrize(
    ("field", "changed"),
    [
        ("id", "01a2311115db7000a97b8ca6b9d59756"),
        ("room", "ops"),
        ("sender", "boss@laptop#a5a5a5a5"),
        ("ts", "2026-12-01T10:05:34.019Z"),
    ],
)
def test_a_ciphertext_given_another_id_room_sender_or_time_does_not_open(field, changed):
    nonce, ciphertext = crypto.seal(KEY, BODY, **ROUTING)

    with pytest.raises(crypto.CryptoError, match="changed on the way"):
        crypto.open_sealed(KEY, nonce, ciphertext, **{**ROUTING, field: changed})


def test_a_ciphertext_does_not_open_under_another_rooms_key():
    nonce, ciphertext = crypto.seal(KEY, BODY, **ROUTING)

    with pytest.raises(crypto.CryptoError):
        crypto.open_sealed(crypto.new_room_key(), nonce, ciphertext, **ROUTING)


def test_each_seal_takes_a_fresh_96_bit_nonce():
    nonces = {crypto.seal(KEY, BODY, **ROUTING)[0] for _ in range(50)}

    assert len(nonces) == 50
    assert all(len(crypto.unb64(n, "nonce")) == 12 for n in nonces)


# ---------------------------------------------------------------- invites, join strings


def test_an_invite_checks_only_under_the_secret_that_signed_it_and_only_until_it_expires():
    invite = crypto.make_claim("s" * 20, kind="join", ttl=900, now=1000, room="team",
                               device="laptop")  # fmt: skip

    claim = crypto.check_claim("s" * 20, invite, kind="join", now=1899)
    assert (claim.room, claim.device, claim.expires) == ("team", "laptop", 1900)
    with pytest.raises(crypto.CryptoError, match="signature"):
        crypto.check_claim("t" * 20, invite, kind="join", now=1000)
    with pytest.raises(crypto.CryptoError, match="expired"):
        crypto.check_claim("s" * 20, invite, kind="join", now=1900)
    with pytest.raises(crypto.CryptoError, match="not a 'status'"):
        crypto.check_claim("s" * 20, invite, kind="status", now=1000)


def test_an_invite_whose_claim_was_edited_no_longer_checks():
    invite = crypto.make_claim("s" * 20, kind="join", ttl=900, now=1000, room="team",
                               device="laptop")  # fmt: skip
    claim = crypto.read_claim(invite)
    forged = crypto.Claim(claim.kind, claim.id, claim.expires, "ops", claim.device)
    payload = crypto.sign_claim("s" * 20, forged).partition(".")[0]

    with pytest.raises(crypto.CryptoError, match="signature"):
        crypto.check_claim("s" * 20, f"{payload}.{invite.partition('.')[2]}", kind="join",
                           now=1000)  # fmt: skip


def test_a_join_string_carries_relay_room_key_and_invite_and_refuses_damage():
    ticket = crypto.JoinTicket("https://relay.example.org", "team", KEY, "payload.sig")
    text = crypto.join_string(ticket)

    assert text.startswith("salon-join:")
    assert crypto.parse_join_string(text) == ticket
    with pytest.raises(crypto.CryptoError):
        crypto.parse_join_string(text[:-6])
    with pytest.raises(crypto.CryptoError):
        crypto.parse_join_string("team")


# ---------------------------------------------------------------- names as they cross


@pytest.mark.parametrize(
    ("local", "wire"),
    [
        ("web-app#3f9c1a20", "web-app@laptop#3f9c1a20"),  # a seat: machine-local
        ("web-app", "web-app"),  # an agent: every seat on every machine
        ("web-app@macmini", "web-app@macmini"),  # already qualified
        ("web-app@macmini#7b02e5d1", "web-app@macmini#7b02e5d1"),
    ],
)
def test_an_addressee_leaves_the_machine_qualified_only_when_it_is_a_local_seat(local, wire):
    assert envelope.wire_name(local, "laptop") == wire


@pytest.mark.parametrize(
    ("wire", "landed"),
    [
        ("web-app@macmini", "web-app"),  # lands on macmini: its own web-app
        ("web-app@macmini#7b02e5d1", "web-app#7b02e5d1"),
        ("web-app@studio", "web-app@studio"),  # a third machine: untouched
        ("web-app@studio#1111aaaa", "web-app@studio#1111aaaa"),
        ("web-app", "web-app"),
    ],
)
def test_an_addressee_lands_on_its_own_machine_without_the_device_and_elsewhere_untouched(
    wire, landed
):
    assert envelope.landed_name(wire, "macmini") == landed


def test_the_sender_is_always_qualified_even_the_bare_agent_name_of_a_cron_job():
    assert envelope.wire_sender("nightly", "laptop") == "nightly@laptop"
    assert envelope.wire_sender("api#a5a5a5a5", "laptop") == "api@laptop#a5a5a5a5"
    with pytest.raises(envelope.EnvelopeError):
        envelope.wire_sender("api@macmini#a5a5a5a5", "laptop")


def test_an_envelope_from_this_machines_own_device_is_not_landed():
    sealed = envelope.seal_entry(
        KEY, device="laptop", id=uuid7(), room="team", ts=timezone.now(), sender="api#a5a5a5a5",
        type="FACT", to=[], re=None, content="hi", meta={},
    )  # fmt: skip

    with pytest.raises(envelope.EnvelopeError, match="not of another machine"):
        envelope.open_envelope(KEY, sealed, room="team", device="laptop")
    opened = envelope.open_envelope(KEY, sealed, room="team", device="macmini")
    assert opened.sender == "api@laptop#a5a5a5a5"


def test_a_roster_may_name_only_seats_of_the_device_that_sent_it():
    honest = envelope.seal_roster(
        KEY, device="laptop", room="team", id=uuid7(), ts=timezone.now(),
        seats=[("api#a5a5a5a5", "live")],
    )  # fmt: skip
    assert envelope.open_envelope(KEY, honest, room="team", device="macmini") == envelope.Roster(
        "laptop", [("api@laptop#a5a5a5a5", "live")]
    )
    body = {"roster": [["api@macmini#a5a5a5a5", "live"]]}
    routing = {"id": str(uuid7()), "sender": "@laptop", "ts": "2026-12-01T10:00:00.000Z"}
    nonce, ciphertext = crypto.seal(KEY, body, room="team", **routing)
    lying = {**routing, "nonce": nonce, "ciphertext": ciphertext}
    with pytest.raises(envelope.EnvelopeError, match="names"):
        envelope.open_envelope(KEY, lying, room="team", device="studio")


# ---------------------------------------------------------------- landing


def land(room: str = "team", **fields) -> dict | None:
    values = {
        "id": uuid7(),
        "room": room,
        "ts": datetime(2026, 12, 1, 10, 0, 0, 123456, tzinfo=UTC),
        "sender": "api@laptop#a5a5a5a5",
        "type": "QUESTION",
        "to": [],
        "re": None,
        "content": "which port?",
        "meta": {"kind": "question"},
    }
    values.update(fields)
    return services.entries.land_entry(**values)


@pytest.mark.django_db
def test_a_landed_entry_keeps_its_id_time_and_sender_and_is_signed_here():
    make_room("team")
    entry_id = uuid7()

    landed = land(id=entry_id)

    row = Entry.objects.select_related("room").get(pk=entry_id)
    assert landed["id"] == str(entry_id)
    assert (row.sender, row.sender_agent, row.via) == ("api@laptop#a5a5a5a5", "api@laptop", "relay")
    assert row.ts == datetime(2026, 12, 1, 10, 0, 0, 123000, tzinfo=UTC)
    assert signing.verify_entry(row)
    seat = Seat.objects.get(name="api@laptop#a5a5a5a5")
    assert seat.remote and seat.host == "laptop"
    assert Membership.objects.current().filter(seat=seat, room=row.room).exists()


@pytest.mark.django_db
def test_an_entry_that_lands_twice_is_stored_once():
    make_room("team")
    entry_id = uuid7()

    assert land(id=entry_id) is not None
    assert land(id=entry_id, content="changed") is None

    assert Entry.objects.filter(pk=entry_id).count() == 1
    assert Entry.objects.get(pk=entry_id).content == "which port?"


@pytest.mark.django_db
def test_a_landed_entry_wakes_by_the_same_rule_as_a_sent_one():
    team = make_room("team")
    web = make_seat("web-app", team)
    make_seat("docs", team)

    landed = land(to=["web-app"])

    decisions = {d.seat_name: d.reason for d in WakeDecision.objects.filter(entry_id=landed["id"])}
    assert decisions == {web.name: "addressed"}
    assert landed["wakes"] == [web.name]


@pytest.mark.django_db
def test_an_answer_from_another_machine_wakes_the_seat_whose_entry_it_answers():
    team = make_room("team")
    asker = make_seat("api", team)
    question = send(asker, team, "which port?", type="QUESTION")

    landed = land(sender="web-app@macmini#7b02e5d1", type="ANSWER",
                  re=uuid.UUID(question["id"]), content="9315")  # fmt: skip

    assert landed["wakes"] == [asker.name]
    assert WakeDecision.objects.get(entry_id=landed["id"]).reason == "reply"


@pytest.mark.django_db
def test_a_landed_entry_is_checked_like_a_sent_one_and_its_sender_must_be_remote():
    make_room("team")

    with pytest.raises(rules.RuleError, match="unknown entry type"):
        land(type="GOSSIP")
    with pytest.raises(rules.RuleError, match="empty"):
        land(content="  ")
    with pytest.raises(rules.RuleError, match="agent@device#session"):
        land(sender="api#a5a5a5a5")
    assert Entry.objects.count() == 0


@pytest.mark.django_db
def test_a_roster_makes_a_machines_seats_members_and_parts_those_it_no_longer_names():
    team = make_room("team")
    hold = timedelta(minutes=6)

    services.seats.remote_roster(
        room=team, device="laptop", seats=[("api@laptop#1", "live"), ("docs@laptop#2", "gone")],
        live_for=hold,
    )  # fmt: skip
    services.seats.remote_roster(
        room=team, device="laptop", seats=[("api@laptop#1", "live")], live_for=hold
    )

    current = Membership.objects.current().filter(room=team)
    assert sorted(current.values_list("seat__name", flat=True)) == ["api@laptop#1"]
    assert Seat.objects.get(name="api@laptop#1").liveness(timezone.now()) == rules.LIVE
    # a name nobody knew of is now one the room knows: a send to it is not refused
    writer = make_seat("web-app", team)
    report = send(writer, team, "hello", to=["api@laptop"])
    # its own machine decides whether it is woken: never claimed here
    assert (report["wakes"], report["decidedThere"]) == ([], ["api@laptop#1"])
