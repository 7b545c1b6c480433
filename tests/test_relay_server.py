"""Relay mode's refusals and limits, through its HTTP API in one process (docs/RELAY.md):
each refusal comes before anything is stored, and says how to fix it."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import pytest
from django.test import Client, override_settings
from django.utils import timezone

from bus.ids import uuid7
from relay import crypto, server
from relay.models import RelayDevice, RelayEnvelope, RelayRoom

pytestmark = pytest.mark.django_db

SECRET = "relay-secret-for-tests-0123456789"
KEY = bytes(range(32))


@pytest.fixture(autouse=True)
def relay_mode():
    server._last_purge[0] = 0.0  # every test starts with retention due
    with override_settings(
        RELAY_SECRET=SECRET,
        RELAY_MAX_ENTRY_BYTES=4096,
        RELAY_RATE=50,
        RELAY_ROOM_ENTRIES=40,
        RELAY_ROOM_BYTES=1 << 20,
        RELAY_RETENTION_HOURS=168,
    ):
        yield


@pytest.fixture
def http():
    return Client()


def invite(room: str = "team", device: str = "laptop", ttl: int = 900, secret=SECRET) -> str:
    return crypto.make_claim(secret, kind="join", ttl=ttl, now=time.time(), room=room,
                             device=device)  # fmt: skip


def join(http, room: str = "team", device: str = "laptop") -> str:
    answer = http.post("/relay/v1/join", {"invite": invite(room, device)}, "application/json")
    assert answer.status_code == 200, answer.json()
    return answer.json()["token"]


def sealed(device: str = "laptop", room: str = "team", content: str = "hi", **fields) -> dict:
    routing = {
        "id": str(fields.pop("id", uuid7())),
        "sender": fields.pop("sender", f"api@{device}#a5a5a5a5"),
        "ts": "2026-12-01T10:00:00.000Z",
    }
    body = {"type": "FACT", "to": [], "re": None, "content": content, "meta": {}}
    nonce, ciphertext = crypto.seal(KEY, body, room=room, **routing)
    return {**routing, "nonce": nonce, "ciphertext": ciphertext}


def push(http, token: str, entries: list[dict], room: str = "team"):
    return http.post(
        f"/relay/v1/rooms/{room}/entries",
        {"entries": entries},
        "application/json",
        headers={"authorization": f"Bearer {token}"},
    )


def pull(http, token: str, after: int = 0, room: str = "team"):
    return http.get(
        f"/relay/v1/rooms/{room}/entries?after={after}&wait=0",
        headers={"authorization": f"Bearer {token}"},
    )


# ---------------------------------------------------------------- who may


def test_an_agent_salon_without_the_relay_secret_is_not_a_relay(http):
    with override_settings(RELAY_SECRET=""):
        answer = http.get("/relay/v1/")

    assert answer.status_code == 404
    assert "salon relay serve" in answer.json()["error"]


def test_an_invite_becomes_a_year_long_token_for_its_room_and_device_only_once(http):
    text = invite()
    first = http.post("/relay/v1/join", {"invite": text}, "application/json")
    again = http.post("/relay/v1/join", {"invite": text}, "application/json")

    assert first.status_code == 200
    device = RelayDevice.objects.get()
    assert (device.room.name, device.name) == ("team", "laptop")
    assert device.expires_at - timezone.now() > timedelta(days=364)
    assert device.token_hash != first.json()["token"]  # stored hashed
    assert again.status_code == 403 and "used already" in again.json()["error"]


@pytest.mark.parametrize(
    ("made", "words"),
    [
        (lambda: invite(ttl=-1), "expired"),
        (lambda: invite(secret="another-secret-0123456789"), "signature"),
        (lambda: invite(device="lap@top"), "device name"),
        (lambda: "not-an-invite", "malformed"),
    ],
)
def test_an_expired_forged_or_malformed_invite_is_refused_and_makes_no_device(http, made, words):
    answer = http.post("/relay/v1/join", {"invite": made()}, "application/json")

    assert answer.status_code == 403
    assert words in answer.json()["error"]
    assert not RelayDevice.objects.exists()


def test_a_token_for_one_room_is_refused_in_another_naming_the_room_it_is_for(http):
    token = join(http, room="team")

    answer = push(http, token, [sealed(room="ops")], room="ops")

    assert answer.status_code == 403
    assert answer.json()["room"] == "team" and "'team'" in answer.json()["error"]
    assert not RelayEnvelope.objects.exists()


def test_a_device_writing_under_another_devices_name_is_refused(http):
    token = join(http, device="laptop")

    answer = push(http, token, [sealed(sender="api@macmini#a5a5a5a5")])

    assert answer.status_code == 403 and "macmini" in answer.json()["error"]
    assert not RelayEnvelope.objects.exists()


def test_rotating_the_relay_secret_revokes_every_device(http):
    token = join(http)

    with override_settings(RELAY_SECRET="a-brand-new-secret-0123456789"):
        answer = pull(http, token)

    assert answer.status_code == 401
    assert "secret has changed" in answer.json()["error"]


def test_a_missing_token_is_a_401(http):
    answer = http.get("/relay/v1/rooms/team/entries?after=0&wait=0")

    assert answer.status_code == 401
    assert answer["WWW-Authenticate"].startswith("Bearer")


# ---------------------------------------------------------------- strict input


@pytest.mark.parametrize(
    ("body", "content_type", "status"),
    [
        ('{"entries": []}', "text/plain", 415),
        ("{nope", "application/json", 400),
        ('{"entries": [], "extra": 1}', "application/json", 422),
        ("[]", "application/json", 422),
        ('{"entries": []}', "application/json", 422),  # an empty push
        ('{"entries": [{"id": "x"}]}', "application/json", 422),
    ],
)
def test_a_push_that_is_not_the_documented_json_is_refused(http, body, content_type, status):
    token = join(http)

    answer = http.post(
        "/relay/v1/rooms/team/entries", body, content_type,
        headers={"authorization": f"Bearer {token}"},
    )  # fmt: skip

    assert answer.status_code == status
    assert answer.json()["error"]
    assert not RelayEnvelope.objects.exists()


# ---------------------------------------------------------------- limits


def test_an_entry_over_the_size_limit_is_refused_naming_it(http):
    token = join(http)
    big = sealed(content="x" * 5000)

    answer = push(http, token, [sealed(), big])

    assert answer.status_code == 413
    assert answer.json()["id"] == big["id"]
    assert "AGENT_SALON_RELAY_MAX_ENTRY_BYTES" in answer.json()["error"]
    assert not RelayEnvelope.objects.exists()


@override_settings(RELAY_ROOM_ENTRIES=1000)
def test_a_device_over_its_rate_is_refused_with_the_wait_and_stores_nothing_of_that_push(http):
    token = join(http)
    assert push(http, token, [sealed() for _ in range(30)]).status_code == 200

    answer = push(http, token, [sealed() for _ in range(21)])

    assert answer.status_code == 429
    assert int(answer["Retry-After"]) >= 1
    assert "AGENT_SALON_RELAY_RATE" in answer.json()["error"]
    assert RelayEnvelope.objects.count() == 30
    assert push(http, token, [sealed() for _ in range(20)]).status_code == 200


def test_a_room_over_its_entry_ceiling_is_refused(http):
    laptop, macmini = join(http, device="laptop"), join(http, device="macmini")
    assert push(http, laptop, [sealed() for _ in range(40)]).status_code == 200

    answer = push(http, macmini, [sealed(device="macmini")])

    assert answer.status_code == 507
    assert "AGENT_SALON_RELAY_ROOM_ENTRIES" in answer.json()["error"]
    assert RelayRoom.objects.get().entries == 40


def test_a_room_over_its_byte_ceiling_is_refused(http):
    token = join(http)
    with override_settings(RELAY_ROOM_BYTES=2000):
        assert push(http, token, [sealed(content="x" * 900)]).status_code == 200
        answer = push(http, token, [sealed(content="x" * 900), sealed(content="x" * 900)])

    assert answer.status_code == 507
    assert "AGENT_SALON_RELAY_ROOM_BYTES" in answer.json()["error"]


def test_entries_past_the_retention_are_dropped_and_a_device_that_missed_them_is_told(http):
    laptop, macmini = join(http, device="laptop"), join(http, device="macmini")
    assert push(http, laptop, [sealed() for _ in range(3)]).status_code == 200
    RelayEnvelope.objects.filter(seq__lte=2).update(stored_at=timezone.now() - timedelta(hours=169))
    server._last_purge[0] = 0.0

    answer = pull(http, macmini, after=0)

    assert [e["seq"] for e in answer.json()["entries"]] == [3]
    assert answer.json()["gap"] == 2
    room = RelayRoom.objects.get()
    assert (room.entries, room.purged_seq) == (1, 2)


# ---------------------------------------------------------------- carrying


def test_a_push_repeated_after_a_lost_answer_stores_each_entry_once(http):
    token = join(http)
    entries = [sealed(), sealed()]

    first = push(http, token, entries).json()
    again = push(http, token, entries).json()

    assert (first["stored"], again["stored"], again["duplicates"]) == (2, 0, 2)
    assert RelayEnvelope.objects.count() == 2


def test_a_pull_hands_out_the_other_devices_entries_in_order_and_how_far_it_read(http):
    laptop, macmini = join(http, device="laptop"), join(http, device="macmini")
    mine = sealed(device="macmini")
    theirs = [sealed(content=f"n{i}") for i in range(3)]
    push(http, macmini, [mine])
    push(http, laptop, theirs)

    answer = pull(http, macmini, after=0).json()

    assert [e["id"] for e in answer["entries"]] == [e["id"] for e in theirs]
    assert answer["cursor"] == 4
    assert pull(http, macmini, after=4).json() == {"entries": [], "cursor": 4, "gap": 0}
    assert RelayDevice.objects.get(name="macmini").cursor == 4


def test_the_relay_keeps_the_routing_fields_and_the_ciphertext_nothing_else(http):
    token = join(http)
    entry = sealed(content="a secret plan")

    push(http, token, [entry])

    row = RelayEnvelope.objects.get()
    assert (str(row.entry_id), row.sender, row.ts, row.device) == (
        str(uuid.UUID(entry["id"])), entry["sender"], entry["ts"], "laptop",
    )  # fmt: skip
    assert b"a secret plan" not in bytes(row.ciphertext)
