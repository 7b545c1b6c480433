"""POST /notify?label=<sender> (README, "The webhook"): every status code, every rule, judged on the
response and on the rows the bus holds afterwards."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import httpx
import pytest
from django.test import Client

from bus import services
from bus.models import Entry, Membership, Seat
from tests.factories import RoomFactory

pytestmark = pytest.mark.django_db


def post(client, body=None, *, label="ci", raw=None, content_type="application/json", **extra):
    url = "/notify" if label is None else f"/notify?label={label}"
    data = raw if raw is not None else json.dumps(body)
    return client.post(url, data=data, content_type=content_type, **extra)


@pytest.fixture
def salon_room():
    return RoomFactory(name="salon")


@pytest.fixture
def team():
    """Room `team` with web-app#aaaa1111 in it (live) and api#bbbb2222 (live)."""
    room = RoomFactory(name="team")
    for agent, session in (("web-app", "aaaa1111"), ("api", "bbbb2222")):
        seat = services.seats.check_in(agent=agent, session_id=session)
        services.rooms.join_room(seat=seat, room="team")
    return room


# ---------------------------------------------------------------- the happy path


def test_a_post_stores_the_entry_before_answering_202_with_id_and_wakes(client, team):
    response = post(client, {"content": "build 812 is green", "room": "team", "to": ["web-app"]})

    assert response.status_code == 202
    body = response.json()
    entry = Entry.objects.get(id=body["id"])
    assert entry.content == "build 812 is green"
    assert entry.room.name == "team"
    assert entry.via == "notify"
    assert body["wakes"] == ["web-app#aaaa1111"]
    assert isinstance(body["notice"], list)
    assert body["from"] == "ci" and body["room"] == "team"


def test_a_source_in_the_body_is_ignored_the_label_is_the_sender(client, team):
    response = post(
        client, {"content": "hi", "room": "team", "source": "web-app#aaaa1111", "from": "x"}
    )

    assert response.status_code == 202
    entry = Entry.objects.get(id=response.json()["id"])
    assert entry.sender == "ci"
    assert entry.sender_agent == "ci"


def test_the_label_writes_as_a_bare_seat_that_joins_no_room(client, team):
    post(client, {"content": "hi", "room": "team"}, label="cron-job")

    seat = Seat.objects.get(name="cron-job")
    assert seat.session_id == ""
    assert not Membership.objects.filter(seat=seat).exists()


def test_the_peer_address_is_recorded_as_sender_addr(client, team):
    response = post(client, {"content": "hi", "room": "team"}, REMOTE_ADDR="10.1.2.3")

    assert Entry.objects.get(id=response.json()["id"]).sender_addr == "10.1.2.3"


def test_target_and_to_are_merged_into_the_addressees(client, team):
    response = post(
        client, {"content": "hi", "room": "team", "target": "api", "to": ["web-app", "api"]}
    )

    assert response.status_code == 202
    assert Entry.objects.get(id=response.json()["id"]).to == ["api", "web-app"]
    assert sorted(response.json()["wakes"]) == ["api#bbbb2222", "web-app#aaaa1111"]


def test_to_may_be_a_single_string(client, team):
    response = post(client, {"content": "hi", "room": "team", "to": "api"})

    assert Entry.objects.get(id=response.json()["id"]).to == ["api"]


def test_without_a_type_a_post_stores_a_fact(client, team):
    response = post(client, {"content": "deployed", "room": "team"})

    assert response.json()["type"] == "FACT"
    assert response.json()["wakes"] == []


def test_without_a_type_meta_kind_decides_it(client, team):
    response = post(
        client, {"content": "who owns this?", "room": "team", "meta": {"kind": "question"}}
    )

    assert response.json()["type"] == "QUESTION"
    assert sorted(response.json()["wakes"]) == ["api#bbbb2222", "web-app#aaaa1111"]


def test_a_type_is_case_insensitive_and_stored_upper_case(client, team):
    response = post(client, {"content": "please rebase", "room": "team", "type": "request"})

    assert Entry.objects.get(id=response.json()["id"]).type == "REQUEST"


def test_re_names_an_earlier_entry_of_the_room(client, team):
    first = post(client, {"content": "first", "room": "team"}).json()["id"]

    response = post(client, {"content": "second", "room": "team", "re": first})

    assert str(Entry.objects.get(id=response.json()["id"]).re) == first


def test_meta_is_stored_without_server_fields(client, team):
    response = post(
        client, {"content": "x", "room": "team", "meta": {"build": 812, "ts": "1999", "id": "z"}}
    )

    assert Entry.objects.get(id=response.json()["id"]).meta == {"build": 812}


# ---------------------------------------------------------------- the room it goes to


def test_with_no_room_a_label_with_no_rooms_writes_into_the_default_room(client, salon_room):
    response = post(client, {"content": "hello"})

    assert response.status_code == 202
    assert response.json()["room"] == "salon"


def test_with_no_room_a_label_in_one_room_writes_there(client, salon_room, team):
    # web-app's seat is in `team` only: a script labelled web-app writes there.
    response = post(client, {"content": "tests done"}, label="web-app")

    assert response.status_code == 202
    assert response.json()["room"] == "team"


def test_with_no_room_a_label_in_several_rooms_writes_into_its_primary_room(
    client, salon_room, team
):
    """REGRESSION: 2026-12-01 — /notify answered 422 for a label in two rooms."""
    seat = services.seats.check_in(agent="web-app", session_id="aaaa1111")
    services.rooms.join_room(seat=seat, room="salon")  # after team: team stays primary

    response = post(client, {"content": "where?"}, label="web-app")

    assert response.status_code == 202
    assert response.json()["room"] == "team"


# ---------------------------------------------------------------- refusals, by status


def test_a_missing_label_is_400_and_says_how_to_fix_it(client, salon_room):
    response = post(client, {"content": "hi", "source": "ci"}, label=None)

    assert response.status_code == 400
    assert "?label=" in response.json()["error"]
    assert not Entry.objects.exists()


@pytest.mark.parametrize("label", ["a/b", "x" * 65, "a..b", "web-app%23abc"])
def test_a_label_that_is_not_a_name_is_400(client, salon_room, label):
    response = post(client, {"content": "hi"}, label=label)

    assert response.status_code == 400
    assert response.json()["field"] == "label"


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml"]
)
def test_a_body_that_is_not_json_is_415(client, salon_room, content_type):
    response = post(client, raw="content=hi", content_type=content_type)

    assert response.status_code == 415
    assert "application/json" in response.json()["error"]


def test_a_json_body_with_a_charset_other_than_utf8_is_415(client, salon_room):
    response = post(client, {"content": "hi"}, content_type="application/json; charset=latin-1")

    assert response.status_code == 415


def test_a_json_content_type_with_utf8_charset_is_accepted(client, salon_room):
    response = post(client, {"content": "hi"}, content_type="application/json; charset=UTF-8")

    assert response.status_code == 202


@pytest.mark.parametrize(
    "raw", ['{"content": "hi"', " ", "not json", '{"content": NaN}', b"\xff\xfe{}", '{"a":1}x']
)
def test_malformed_json_is_400(client, salon_room, raw):
    response = post(client, raw=raw)

    assert response.status_code == 400
    assert "not valid JSON" in response.json()["error"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (["hi"], "body"),
        ("hi", "body"),
        ({}, "content"),
        ({"content": None}, "content"),
        ({"content": 42}, "content"),
        ({"content": "hi", "to": 7}, "to"),
        ({"content": "hi", "to": ["a", 7]}, "to"),
        ({"content": "hi", "target": ["a"]}, "target"),
        ({"content": "hi", "room": 1}, "room"),
        ({"content": "hi", "type": True}, "type"),
        ({"content": "hi", "re": 5}, "re"),
        ({"content": "hi", "meta": ["kind"]}, "meta"),
        ({"content": "hi", "romo": "team"}, "romo"),
    ],
)
def test_a_body_of_the_wrong_shape_is_422_naming_the_field(client, salon_room, body, field):
    response = post(client, body)

    assert response.status_code == 422
    assert response.json()["field"] == field
    assert field in response.json()["error"]
    assert not Entry.objects.exists()


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"content": "   "}, "empty"),
        ({"content": "x" * (64 * 1024 + 1)}, "64 KiB"),
        ({"content": "hi", "type": "SHOUT"}, "QUESTION"),
        ({"content": "hi", "meta": {f"k{i}": i for i in range(33)}}, "32"),
        ({"content": "hi", "re": "0190f0f0-0000-7000-8000-000000000000"}, "re="),
        ({"content": "hi", "room": "no/such"}, "room name"),
    ],
)
def test_a_rule_of_the_bus_refuses_with_422_naming_the_rule(client, salon_room, body, words):
    response = post(client, body)

    assert response.status_code == 422
    assert words in response.json()["error"]


def test_an_unknown_room_is_404_and_lists_the_rooms(client, salon_room, team):
    response = post(client, {"content": "hi", "room": "tema"})

    assert response.status_code == 404
    assert response.json()["rooms"] == ["salon", "team"]
    assert "salon rooms --create tema" in response.json()["error"]
    assert not Entry.objects.exists()


def test_an_unknown_addressee_is_422_and_lists_the_names(client, team):
    response = post(client, {"content": "hi", "room": "team", "to": ["web-ap"]})

    assert response.status_code == 422
    body = response.json()
    assert body["field"] == "to"
    assert body["names"][0] == "web-app"
    assert set(body["names"]) >= {"web-app", "web-app#aaaa1111", "api", "api#bbbb2222"}
    assert not Entry.objects.exists()


def test_a_refused_send_leaves_no_seat_behind(client, team):
    post(client, {"content": "hi", "room": "team", "to": ["nobody"]}, label="typo-bot")

    assert not Seat.objects.filter(name="typo-bot").exists()


def test_a_body_over_4_mib_is_413(client, salon_room):
    big = json.dumps({"content": "x" * (4 * 1024 * 1024 + 10)})

    response = post(client, raw=big)

    assert response.status_code == 413
    assert response.json()["limit"] == 4 * 1024 * 1024


def test_a_body_just_under_4_mib_is_not_413_but_the_content_rule(client, salon_room):
    body = json.dumps({"content": "x" * (4 * 1024 * 1024 - 100)})

    response = post(client, raw=body)

    assert response.status_code == 422
    assert "64 KiB" in response.json()["error"]


def test_a_label_with_a_token_needs_it_401_when_missing(client, salon_room):
    services.tokens.issue_token(label="ci")

    response = post(client, {"content": "hi"})

    assert response.status_code == 401
    assert "Authorization: Bearer" in response.json()["error"]
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert not Entry.objects.exists()


def test_a_wrong_token_is_401(client, salon_room):
    services.tokens.issue_token(label="ci")

    response = post(client, {"content": "hi"}, headers={"authorization": "Bearer salon_wrong"})

    assert response.status_code == 401
    assert "not valid" in response.json()["error"]


def test_a_token_of_another_label_is_401(client, salon_room):
    services.tokens.issue_token(label="ci")
    other = services.tokens.issue_token(label="deploy")

    response = post(client, {"content": "hi"}, headers={"authorization": f"Bearer {other}"})

    assert response.status_code == 401


def test_the_right_token_is_accepted(client, salon_room):
    token = services.tokens.issue_token(label="ci")

    response = post(client, {"content": "hi"}, headers={"authorization": f"Bearer {token}"})

    assert response.status_code == 202


def test_a_revoked_token_is_401(client, salon_room):
    token = services.tokens.issue_token(label="ci")
    services.tokens.issue_token(label="ci")
    services.tokens.revoke_tokens(label="ci")
    services.tokens.issue_token(label="ci")

    response = post(client, {"content": "hi"}, headers={"authorization": f"Bearer {token}"})

    assert response.status_code == 401


def test_with_require_tokens_every_label_needs_one(client, salon_room, settings):
    settings.REQUIRE_TOKENS = True

    response = post(client, {"content": "hi"}, label="anyone")

    assert response.status_code == 401


def test_a_label_without_tokens_needs_none(client, salon_room):
    services.tokens.issue_token(label="deploy")

    assert post(client, {"content": "hi"}, label="ci").status_code == 202


def test_the_token_is_checked_before_the_body(client, salon_room):
    services.tokens.issue_token(label="ci")

    response = post(client, raw="not json", content_type="text/plain")

    assert response.status_code == 401


@pytest.mark.parametrize("method", ["get", "put", "delete", "patch"])
def test_only_post_is_allowed_405_with_allow(client, method):
    response = getattr(client, method)("/notify?label=ci")

    assert response.status_code == 405
    assert response["Allow"] == "POST"
    assert "POST" in response.json()["error"]


def test_the_webhook_needs_no_csrf_token(salon_room):
    strict = Client(enforce_csrf_checks=True)

    response = post(strict, {"content": "hi"})

    assert response.status_code == 202


def test_an_internal_failure_is_a_json_500_without_a_traceback(client, salon_room, monkeypatch):
    def explode(**kwargs):
        raise RuntimeError("secret internals /home/x/db.py line 7")

    monkeypatch.setattr(services.entries, "send_entry", explode)

    response = post(client, {"content": "hi"})

    assert response.status_code == 500
    assert set(response.json()) == {"error"}
    assert "secret internals" not in response.content.decode()
    assert "Traceback" not in response.content.decode()


@pytest.mark.parametrize(
    "status_body",
    [
        ({"content": "hi", "room": "nope"}, 404),
        ({"content": 1}, 422),
    ],
)
def test_every_error_body_is_json_with_an_error_text(client, salon_room, status_body):
    body, status = status_body

    response = post(client, body)

    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    assert isinstance(response.json()["error"], str) and response.json()["error"]


# ---------------------------------------------------------------- the real daemon


def read_entry_elsewhere(env: dict[str, str], entry_id: str):
    """Read an entry through a connection of our own (not the daemon's, not Django's)."""
    query = "SELECT sender, content, via, sender_addr FROM bus_entry WHERE id = {}"
    if env.get("DATABASE_URL"):
        import psycopg

        with psycopg.connect(env["DATABASE_URL"]) as db:
            return db.execute(query.format("%s"), (entry_id,)).fetchone()
    with sqlite3.connect(Path(env["AGENT_SALON_DB"])) as db:
        return db.execute(query.format("?"), (entry_id.replace("-", ""),)).fetchone()


@pytest.mark.slow
def test_over_a_real_daemon_the_row_is_committed_when_the_202_arrives(daemon, env):
    url = daemon.url + "/notify?label=ci"

    response = httpx.post(url, json={"content": "from CI", "source": "spoof"}, timeout=10)

    assert response.status_code == 202
    # A second, independent connection to the daemon's database sees the row already.
    row = read_entry_elsewhere(env, response.json()["id"])
    assert row == ("ci", "from CI", "notify", "127.0.0.1")


@pytest.mark.slow
def test_over_a_real_daemon_refusals_are_json(daemon):
    missing_room = httpx.post(
        daemon.url + "/notify?label=ci", json={"content": "x", "room": "nope"}, timeout=10
    )
    no_label = httpx.post(daemon.url + "/notify", json={"content": "x"}, timeout=10)
    not_json = httpx.post(daemon.url + "/notify?label=ci", content=b"x=1", timeout=10)

    assert missing_room.status_code == 404 and missing_room.json()["rooms"] == ["salon"]
    assert no_label.status_code == 400 and "label" in no_label.json()["error"]
    assert not_json.status_code == 415


@pytest.mark.slow
def test_over_a_real_daemon_a_chunked_body_over_4_mib_is_413(daemon):
    def chunks():
        yield b'{"content": "'
        for _ in range(5):
            yield b"x" * (1024 * 1024)
        yield b'"}'

    response = httpx.post(
        daemon.url + "/notify?label=ci",
        content=chunks(),
        headers={"Content-Type": "application/json"},
        timeout=30,
    )

    assert response.status_code == 413


@pytest.mark.slow
def test_over_a_real_daemon_notify_keeps_the_full_chains_headers_and_host_check(daemon):
    """The daemon answers /notify without Django's handler (salon.lean): the same answer
    headers as every other Django path, and the same Host/Origin refusal."""
    posted = httpx.post(daemon.url + "/notify?label=ci", json={"content": "h"}, timeout=10)
    other = httpx.get(daemon.url + "/metrics", timeout=10)
    foreign = httpx.post(
        daemon.url + "/notify?label=ci",
        json={"content": "h"},
        headers={"Host": "evil.example"},
        timeout=10,
    )
    wrong_method = httpx.get(daemon.url + "/notify?label=ci", timeout=10)

    assert posted.status_code == 202
    for name in ("x-frame-options", "x-content-type-options", "referrer-policy"):
        assert posted.headers[name] == other.headers[name], name
    assert posted.headers["cross-origin-opener-policy"] == "same-origin"
    assert foreign.status_code == 403 and "not allowed" in foreign.json()["error"]
    assert wrong_method.status_code == 405 and wrong_method.headers["allow"] == "POST"


@pytest.mark.slow
def test_over_a_real_daemon_concurrent_posts_are_each_stored_once(daemon, env):
    import asyncio

    async def main():
        async with httpx.AsyncClient(timeout=30) as client:
            return await asyncio.gather(
                *(
                    client.post(daemon.url + "/notify?label=ci", json={"content": f"c{i}"})
                    for i in range(40)
                )
            )

    responses = asyncio.run(main())

    assert [r.status_code for r in responses] == [202] * 40
    ids = {r.json()["id"] for r in responses}
    assert len(ids) == 40
    for entry_id in ids:
        assert read_entry_elsewhere(env, entry_id)[0] == "ci"


# ---------------------------------------------------------------- group commit


def _notify_requests(bodies, label="ci"):
    from django.test import RequestFactory

    from relay.views import Posted

    factory = RequestFactory()
    return [
        Posted.from_request(
            factory.post(
                f"/notify?label={label}", data=json.dumps(b), content_type="application/json"
            )
        )
        for b in bodies
    ]


def _submit_all(requests, batches):
    import asyncio

    from django.db import connections

    from relay import views

    real = views._answer_batch

    def recorded(batch):
        batches.append(len(batch))
        return real(batch)

    async def main():
        commit = views.GroupCommit()
        return await asyncio.gather(*(commit.submit(r) for r in requests))

    views._answer_batch = recorded
    try:
        return asyncio.run(main())
    finally:
        views._answer_batch = real
        # The database thread's connection, closed: the test database can be dropped.
        asyncio.run(views.on_database_thread(connections.close_all))


@pytest.mark.django_db(transaction=True)
def test_concurrent_posts_share_one_transaction_and_a_refused_one_rolls_back_alone():
    RoomFactory(name="team")
    bodies = [{"content": f"n{i}", "room": "team"} for i in range(5)]
    bodies[2] = {"content": "lost", "room": "no-such-room"}
    batches = []

    responses = _submit_all(_notify_requests(bodies), batches)

    assert batches == [5]  # one transaction for the five
    assert [status for status, _ in responses] == [202, 202, 404, 202, 202]
    stored = list(Entry.objects.order_by("seq").values_list("content", flat=True))
    assert stored == ["n0", "n1", "n3", "n4"]
    assert [body["id"] for status, body in responses if status == 202] == [
        str(i) for i in Entry.objects.order_by("seq").values_list("id", flat=True)
    ]


@pytest.mark.django_db(transaction=True)
def test_a_new_labels_first_post_refused_in_a_batch_leaves_the_next_its_own_seat():
    """The batch reuses a label's seat only once a request of it was stored: the first
    post made the seat and was refused, so its seat went with it; the next ones make it
    again, and all of them write as that one seat."""
    RoomFactory(name="team")
    bodies = [{"content": "lost", "room": "no-such-room"}] + [
        {"content": f"n{i}", "room": "team"} for i in range(3)
    ]
    batches = []

    responses = _submit_all(_notify_requests(bodies, label="newcomer"), batches)

    assert batches == [4]
    assert [status for status, _ in responses] == [404, 202, 202, 202]
    [seat] = Seat.objects.filter(agent__name="newcomer")
    assert set(Entry.objects.values_list("sender", flat=True)) == {seat.name}
    assert Entry.objects.count() == 3


@pytest.mark.django_db(transaction=True)
def test_when_a_batchs_commit_fails_no_request_of_it_is_acknowledged_or_stored(monkeypatch):
    from django.db import OperationalError, connections

    RoomFactory(name="team")

    def failing_commit(self):
        raise OperationalError("disk I/O error")

    monkeypatch.setattr(type(connections["default"]), "commit", failing_commit)
    responses = _submit_all(
        _notify_requests([{"content": f"n{i}", "room": "team"} for i in range(3)]), []
    )
    monkeypatch.undo()

    assert [status for status, _ in responses] == [500, 500, 500]
    assert not Entry.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_batch_stored_is_acknowledged_even_if_an_after_commit_callback_fails(monkeypatch):
    from bus import signals

    RoomFactory(name="team")

    def broken(**kwargs):
        raise RuntimeError("a receiver of entry_stored failed")

    signals.entry_stored.connect(broken, weak=False)
    try:
        responses = _submit_all(
            _notify_requests([{"content": f"n{i}", "room": "team"} for i in range(3)]), []
        )
    finally:
        signals.entry_stored.disconnect(broken)

    assert [status for status, _ in responses] == [202, 202, 202]
    assert Entry.objects.count() == 3


# What a refusal says depends on nothing the store holds: the daemon's own path
# (salon.lean) and the Django view must say it alike, status, headers and body.
REFUSALS = {
    "no label": {"label": None, "body": {"content": "x"}},
    "a label that is no name": {"label": "bad%20name", "body": {"content": "x"}},
    "form data": {"raw": "content=x", "content_type": "application/x-www-form-urlencoded"},
    "not JSON": {"raw": "{not json"},
    "a number for content": {"body": {"content": 5}},
    "an unknown field": {"body": {"content": "x", "romo": "team"}},
    "latin-1": {"raw": "{}", "content_type": "application/json; charset=latin-1"},
    "a body over 4 MiB": {"raw": '"' + "x" * (4 * 1024 * 1024) + '"'},
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_the_daemons_own_notify_path_refuses_as_the_django_view_does(case, daemon, client):
    spec = dict(REFUSALS[case])
    label = spec.pop("label", "ci")
    raw = spec.get("raw")
    content_type = spec.get("content_type", "application/json")
    data = raw if raw is not None else json.dumps(spec["body"])
    query = "" if label is None else f"?label={label}"

    through_django = client.post("/notify" + query, data=data, content_type=content_type)
    through_daemon = httpx.post(
        f"{daemon.url}/notify{query}",
        content=data.encode(),
        headers={"content-type": content_type},
        timeout=30,
    )

    assert through_daemon.status_code == through_django.status_code
    assert through_daemon.json() == through_django.json()
    assert through_daemon.headers["content-type"] == through_django["Content-Type"]
