"""Two machines and a relay, as real processes on 127.0.0.1 (docs/RELAY.md).

Machine A and machine B each have a store of their own (two data directories) and a
daemon; a third daemon runs in relay mode with a store of its own. They are joined by
the real handshake commands: `salon relay use` and `salon invite` on A, `salon join
salon-join:…` on B. Everything is judged on what the stores hold, what the commands
print and what an MCP stream receives; every wait polls a condition with a deadline.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from relay import client, crypto
from tests.live_kit import PASSWORD, Watch, events, read_until, staff_client, stream_timeout
from tests.mcp_helpers import RawSession
from tests.support import (
    Daemon,
    drop_store,
    dump_store,
    execute_store,
    migrate,
    query_store,
    run_django_script,
    run_salon,
    salon_cmd,
    salon_env,
    stretched,
)

pytestmark = pytest.mark.slow

SECRET = "relay-secret-for-tests-0123456789"
# Small enough that one test can write an entry the relay will not carry.
MAX_ENTRY_BYTES = 8192


@dataclass
class Machine:
    name: str
    env: dict[str, str]
    cwd: Path
    daemon: Daemon | None = None

    def salon(self, *args: str, agent: str = "api", session: str | None = None, **env):
        extra = {"AGENT_SALON_NAME": agent, **env}
        if session:
            extra["CLAUDE_CODE_SESSION_ID"] = session
        return run_salon(*args, env={**self.env, **extra}, cwd=self.cwd)

    def rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        return query_store(self.env, sql, params)

    def bridge(self) -> dict:
        [row] = self.rows(
            "SELECT b.cursor, b.pushed, b.landed, b.duplicates, b.refused, b.rejected "
            "FROM relay_bridgedroom b JOIN bus_room r ON r.id = b.room_id WHERE r.name = 'team'"
        )
        return dict(
            zip(
                ("cursor", "pushed", "landed", "duplicates", "refused", "rejected"),
                row,
                strict=True,
            )
        )

    def entry_ids(self, content_like: str) -> list[str]:
        found = self.rows("SELECT id FROM bus_entry WHERE content LIKE ?", (content_like,))
        return [uuid.UUID(str(row[0])).hex for row in found]


@dataclass
class Salons:
    relay: Machine
    a: Machine
    b: Machine
    base: Path
    tmp: str

    def notify(self, machine: Machine, label: str, content: str, **fields) -> dict:
        answer = httpx.post(
            f"{machine.daemon.url}/notify?label={label}",
            json={"content": content, "room": "team", **fields},
            timeout=30,
        )
        assert answer.status_code == 202, answer.text
        return answer.json()

    def machine(self, name: str) -> Machine:
        """Another machine with a store of its own (no daemon)."""
        directory = self.base / name
        directory.mkdir()
        env = salon_env(directory, TMPDIR=self.tmp)
        migrate(env)
        return Machine(name, env, directory)


def eventually(check, timeout: float = 30, what: str = "the condition"):
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout} s")
        time.sleep(0.1)


def relay_envelope_ids(salons: Salons) -> list[str]:
    return [uuid.UUID(str(r[0])).hex for r in salons.relay.rows(
        "SELECT entry_id FROM relay_relayenvelope"
    )]  # fmt: skip


@pytest.fixture(scope="module")
def salons(tmp_path_factory):
    tmp = tempfile.mkdtemp(prefix="rl-", dir="/tmp")  # a short TMPDIR for the local lines
    base = tmp_path_factory.mktemp("relay")
    machines = {}
    for name, extra in (
        ("relay", {"AGENT_SALON_RELAY_SECRET": SECRET,
                   "AGENT_SALON_RELAY_MAX_ENTRY_BYTES": str(MAX_ENTRY_BYTES)}),
        ("a", {}),
        ("b", {}),
    ):  # fmt: skip
        directory = base / name
        directory.mkdir()
        env = salon_env(directory, TMPDIR=tmp, **extra)
        migrate(env)
        machines[name] = Machine(name, env, directory)
    relay, a, b = machines["relay"], machines["a"], machines["b"]
    relay.daemon = Daemon(env=relay.env, cwd=relay.cwd, command=("relay", "serve"))
    a.daemon = Daemon(env=a.env, cwd=a.cwd)
    b.daemon = Daemon(env=b.env, cwd=b.cwd)
    for machine in (relay, a, b):
        machine.daemon.launch()
    for machine in (relay, a, b):
        machine.daemon.wait_ready(90)
    salons = Salons(relay, a, b, base, tmp)
    try:
        used = a.salon("relay", "use", relay.daemon.url, "--secret", SECRET, "--device", "machineA")
        assert used.returncode == 0, used.stderr
        assert a.salon("rooms", "--create", "team").returncode == 0
        invited = a.salon("invite", "team", "--for", "machineB")
        assert invited.returncode == 0, invited.stderr
        joined = b.salon("join", invited.stdout.strip())
        assert joined.returncode == 0, joined.stderr
        # Both bridges carry the room once each daemon has read the keys file.
        eventually(
            lambda: (
                len(relay.rows("SELECT name FROM relay_relaydevice WHERE cursor >= 0")) == 2
                and all(m.rows("SELECT last_sync_at FROM relay_bridgedroom")[0][0] for m in (a, b))
            ),
            what="both bridges synced",
        )
        yield salons
    finally:
        for machine in (relay, a, b):
            machine.daemon.stop()
        for machine in (relay, a, b):
            drop_store(machine.env)
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------- a question and its answer


async def test_a_question_for_an_agent_on_another_machine_is_pushed_to_its_stream_there_and_the_answer_wakes_the_asker(  # noqa: E501
    salons,
):
    a, b = salons.a, salons.b
    assert a.salon("join", "team", session="a5a5a5a5-0001").returncode == 0
    async with httpx.AsyncClient(timeout=30) as http:
        session = await RawSession(http, b.daemon.url, "label=web-app&room=team").open()
        async with session.stream() as stream:
            await stream.next(timeout=30, comments=True)  # the stream is open
            seat_b = await session.seat()
            remote_b = seat_b.replace("web-app#", "web-app@machineB#")
            # B's roster tells A who is in the room there, before B wrote anything.
            eventually(
                lambda: a.rows(
                    "SELECT 1 FROM bus_membership m JOIN bus_seat s ON s.id = m.seat_id "
                    "WHERE s.name = ? AND s.remote AND m.left_at IS NULL",
                    (remote_b,),
                ),
                what=f"A knows {remote_b}",
            )
            asked = a.salon(
                "send", "team", "QUESTION", "which port does web-app listen on?",
                "--to", "web-app@machineB", "--json", session="a5a5a5a5-0001",
            )  # fmt: skip
            assert asked.returncode == 0, asked.stderr
            question = json.loads(asked.stdout)
            # B decides whether it is woken: the report never claims it
            assert (question["wakes"], question["decidedThere"]) == ([], [remote_b])

            pushed = await stream.next(timeout=30)
            params = pushed["message"]["params"]
            assert params["meta"]["id"] == question["id"]
            assert params["meta"]["source"] == "api@machineA#a5a5a5a5"
            assert params["content"] == "which port does web-app listen on?"
            landed = b.rows(
                'SELECT sender, "to", via FROM bus_entry WHERE id = ?',
                (uuid.UUID(question["id"]).hex,),
            )
            assert [(s, json.loads(t), v) for s, t, v in landed] == [
                ("api@machineA#a5a5a5a5", ["web-app"], "relay")
            ]
            assert b.rows(
                "SELECT seat_name, woken, reason FROM bus_wakedecision WHERE entry_id = ?",
                (uuid.UUID(question["id"]).hex,),
            ) == [(seat_b, 1, "addressed")]

            answer = await session.result(
                "send", {"text": "9315", "type": "ANSWER", "re": question["id"], "room": "team"}
            )
    assert (answer["wakes"], answer["decidedThere"]) == ([], ["api@machineA#a5a5a5a5"])
    woken = eventually(
        lambda: a.rows(
            "SELECT seat_name, woken, reason FROM bus_wakedecision WHERE entry_id = ?",
            (uuid.UUID(answer["id"]).hex,),
        ),
        what="the answer landed on A",
    )
    assert woken == [("api#a5a5a5a5", 1, "reply")]
    waiting = a.salon("wait", "--once", "team", session="a5a5a5a5-0001")
    assert "ANSWER from web-app@machineB#" in waiting.stdout, waiting.stdout + waiting.stderr


def test_an_agent_name_wakes_its_seats_on_both_machines(salons):
    a, b = salons.a, salons.b
    assert b.salon("join", "team", agent="docs", session="d0c5d0c5-0002").returncode == 0
    assert a.salon("join", "team", agent="docs", session="d0c5aaaa-0003").returncode == 0
    eventually(
        lambda: a.rows("SELECT 1 FROM bus_seat WHERE name = 'docs@machineB#d0c5d0c5'"),
        what="A knows B's docs seat",
    )

    sent = a.salon("send", "team", "REQUEST", "regenerate the API docs", "--to", "docs",
                   "--json", session="a5a5a5a5-0001")  # fmt: skip

    report = json.loads(sent.stdout)
    # On A, `docs` names the local seat, and B's seat by its agent without the device:
    # A wakes its own; B decides for its seat.
    assert report["wakes"] == ["docs#d0c5aaaa"]
    assert report["decidedThere"] == ["docs@machineB#d0c5d0c5"]
    hex_id = uuid.UUID(report["id"]).hex
    woken_on_b = eventually(
        lambda: b.rows(
            "SELECT seat_name, reason FROM bus_wakedecision WHERE entry_id = ? AND woken",
            (hex_id,),
        ),
        what="the request landed on B",
    )
    # B decides for its own seat; a seat of A it knows of is decided too, and told on A.
    assert [row for row in woken_on_b if "@" not in row[0]] == [("docs#d0c5d0c5", "addressed")]


# ---------------------------------------------------------------- what the relay holds


def test_the_relay_stores_only_ciphertext_never_the_text(salons):
    marker = f"plaintext-marker-{uuid.uuid4().hex}"
    sent = salons.notify(salons.a, "api", f"the deploy key is {marker}", meta={"note": marker})
    eventually(lambda: salons.b.entry_ids(f"%{marker}%"), what="the entry landed on B")

    assert any(marker in row for row in dump_store(salons.a.env))  # the search finds text
    assert not [row for row in dump_store(salons.relay.env) if marker in row]
    if not salons.relay.env.get("DATABASE_URL"):
        database = Path(salons.relay.env["AGENT_SALON_DB"])
        for path in (database, *database.parent.glob(database.name + "-*")):
            assert marker.encode() not in path.read_bytes(), path
    assert uuid.UUID(sent["id"]).hex in relay_envelope_ids(salons)


def test_keys_and_tokens_are_in_private_files_and_the_secret_stays_on_the_operators_machine(
    salons,
):
    keys_of = {}
    for machine in (salons.a, salons.b):
        path = machine.cwd / "relay-keys.json"
        assert path.stat().st_mode & 0o777 == 0o600
        keys_of[machine.name] = json.loads(path.read_text())
    assert keys_of["a"]["secret"] == SECRET
    assert keys_of["b"]["secret"] == ""
    room_key = keys_of["a"]["rooms"]["team"]["key"]
    assert keys_of["b"]["rooms"]["team"]["key"] == room_key
    for machine in (salons.a, salons.b, salons.relay):
        dump = "\n".join(dump_store(machine.env))
        assert room_key not in dump
        assert keys_of["b"]["rooms"]["team"]["token"] not in dump
    assert SECRET not in "\n".join(dump_store(salons.relay.env))


# ---------------------------------------------------------------- a relay that lies


def test_an_entry_whose_sender_or_time_the_relay_changed_is_refused_and_counted(salons):
    a, b = salons.a, salons.b
    before = b.bridge()
    b.daemon.stop()  # B reads nothing until the relay's rows are changed
    tag = uuid.uuid4().hex[:8]
    forged = salons.notify(a, "api", f"forged sender {tag}")
    redated = salons.notify(a, "api", f"forged time {tag}")
    honest = salons.notify(a, "api", f"honest {tag}")
    wanted = {uuid.UUID(e["id"]).hex for e in (forged, redated, honest)}
    eventually(lambda: wanted <= set(relay_envelope_ids(salons)), what="the relay holds all 3")
    execute_store(
        salons.relay.env,
        "UPDATE relay_relayenvelope SET sender = ? WHERE entry_id = ?",
        ("boss@machineA", uuid.UUID(forged["id"]).hex),
    )
    execute_store(
        salons.relay.env,
        "UPDATE relay_relayenvelope SET ts = ? WHERE entry_id = ?",
        ("2020-01-01T00:00:00.000Z", uuid.UUID(redated["id"]).hex),
    )

    b.daemon.start(timeout=90)
    eventually(lambda: b.entry_ids(f"honest {tag}"), what="the honest entry landed")

    assert b.entry_ids(f"forged % {tag}") == []
    after = b.bridge()
    assert after["refused"] - before["refused"] == 2
    listed = b.salon("rooms")
    assert f"{after['refused']} REFUSED" in listed.stdout, listed.stdout


# ---------------------------------------------------------------- what the relay refuses


def test_a_token_for_one_room_is_refused_for_another_with_a_403_naming_its_room(salons):
    token = json.loads((salons.b.cwd / "relay-keys.json").read_text())["rooms"]["team"]["token"]
    answer = httpx.get(
        f"{salons.relay.daemon.url}/relay/v1/rooms/ops/entries?after=0",
        headers={"authorization": f"Bearer {token}"},
    )
    assert answer.status_code == 403
    assert "'team'" in answer.json()["error"]
    assert answer.json()["room"] == "team"


def test_a_device_writing_as_another_device_is_refused_with_a_403_and_nothing_is_stored(salons):
    secrets = json.loads((salons.b.cwd / "relay-keys.json").read_text())["rooms"]["team"]
    key = base64.urlsafe_b64decode(secrets["key"] + "=" * (-len(secrets["key"]) % 4))
    entry_id = str(uuid.uuid4())
    sender = "api@machineA#a5a5a5a5"  # B pretending to be A
    ts = "2026-12-01T10:00:00.000Z"
    nonce, ciphertext = crypto.seal(
        key, {"type": "FACT", "to": [], "re": None, "content": "hi", "meta": {}},
        id=entry_id, room="team", sender=sender, ts=ts,
    )  # fmt: skip
    answer = httpx.post(
        f"{salons.relay.daemon.url}/relay/v1/rooms/team/entries",
        json={"entries": [{"id": entry_id, "sender": sender, "ts": ts, "nonce": nonce,
                           "ciphertext": ciphertext}]},
        headers={"authorization": f"Bearer {secrets['token']}"},
    )  # fmt: skip
    assert answer.status_code == 403
    assert "machineB" in answer.json()["error"]
    assert uuid.UUID(entry_id).hex not in relay_envelope_ids(salons)


def test_an_invite_is_single_use_and_an_expired_one_is_refused(salons):
    a = salons.a
    invited = a.salon("invite", "team", "--for", "machineC")
    c, d = salons.machine("c"), salons.machine("d")
    try:
        first = c.salon("join", invited.stdout.strip())
        again = d.salon("join", invited.stdout.strip().replace("machineC", "machineC"))
        short = a.salon("invite", "team", "--for", "machineD", "--ttl", "1")
        ticket = crypto.parse_join_string(short.stdout.strip())
        expiry = crypto.read_claim(ticket.invite).expires
        eventually(lambda: time.time() > expiry + 0.1, what="the invite's expiry")
        late = d.salon("join", short.stdout.strip())
        direct = httpx.post(
            f"{salons.relay.daemon.url}/relay/v1/join", json={"invite": ticket.invite}
        )
    finally:
        drop_store(c.env)
        drop_store(d.env)

    assert first.returncode == 0, first.stderr
    assert again.returncode == 1
    assert "used already" in again.stderr and "Traceback" not in again.stderr
    assert late.returncode == 1 and "expired" in late.stderr
    assert direct.status_code == 403 and "expired" in direct.json()["error"]
    devices = {name for (name,) in salons.relay.rows("SELECT name FROM relay_relaydevice")}
    assert {"machineC"} <= devices and "machineD" not in devices


def test_an_entry_over_the_relays_size_limit_is_not_carried_and_the_room_goes_on(salons):
    a, b = salons.a, salons.b
    before = a.bridge()
    tag = uuid.uuid4().hex[:8]
    salons.notify(a, "api", f"too big {tag} " + "x" * (MAX_ENTRY_BYTES + 100))
    salons.notify(a, "api", f"small {tag}")

    eventually(lambda: b.entry_ids(f"small {tag}"), what="the small entry landed")
    assert b.entry_ids(f"too big {tag}%") == []
    assert a.bridge()["rejected"] - before["rejected"] == 1
    assert "not carried" in a.salon("rooms").stdout


def test_a_damaged_join_string_is_a_one_line_usage_error(salons):
    invited = salons.a.salon("invite", "team", "--for", "machineF").stdout.strip()

    done = salons.b.salon("join", invited[:-10])

    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "join string" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_join_string_whose_room_is_not_its_invites_is_refused_at_join_and_not_spent(salons):
    invited = salons.a.salon("invite", "team", "--for", "machineG").stdout.strip()
    ticket = crypto.parse_join_string(invited)
    forged = crypto.join_string(dataclasses.replace(ticket, room="ops"))
    g = salons.machine("g")
    try:
        done = g.salon("join", forged)
        rooms = g.salon("rooms").stdout
        joined = g.salon("join", invited)
    finally:
        drop_store(g.env)

    assert done.returncode == 2, done.stderr
    assert "'ops'" in done.stderr and "'team'" in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "ops" not in rooms
    assert joined.returncode == 0, joined.stderr  # the invite was not spent


def test_salon_relay_bridge_carries_a_room_when_no_daemon_runs(salons):
    e = salons.machine("e")
    try:
        joined = e.salon(
            "join", salons.a.salon("invite", "team", "--for", "machineE").stdout.strip()
        )
        assert joined.returncode == 0, joined.stderr
        bridge = subprocess.Popen(
            salon_cmd("relay", "bridge"), env=e.env, cwd=e.cwd, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            tag = uuid.uuid4().hex[:8]
            salons.notify(salons.a, "api", f"for the bridge alone {tag}")
            eventually(lambda: e.entry_ids(f"for the bridge alone {tag}"), what="it landed on E")
        finally:
            bridge.send_signal(signal.SIGINT)
            try:
                _, err = bridge.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                bridge.kill()  # it failed to stop: fail, and leave no process behind
                raise
    finally:
        drop_store(e.env)
    assert bridge.returncode == 0, err
    assert "Traceback" not in err


# ---------------------------------------------------------------- listings


def test_salon_rooms_shows_the_bridge_and_relay_status_shows_the_relays_side(salons):
    a, b = salons.a, salons.b
    rooms = json.loads(a.salon("rooms", "--json").stdout)
    [team] = [r for r in rooms if r["room"] == "team"]
    assert team["bridge"]["relay"] == salons.relay.daemon.url
    assert team["bridge"]["device"] == "machineA"
    assert team["bridge"]["lastSync"] is not None
    assert "salon" in [r["room"] for r in rooms if "bridge" not in r]
    shown = a.salon("rooms").stdout
    assert f"bridged to {salons.relay.daemon.url} as machineA · synced" in shown

    for machine in (a, b):
        status = machine.salon("relay", "status", "--json")
        assert status.returncode == 0, status.stderr
        view = json.loads(status.stdout)
        [room] = [r for r in view["rooms"] if r["room"] == "team"]
        assert {"machineA", "machineB"} <= {d["device"] for d in room["relay"]["devices"]}
        assert room["relay"]["entries"] > 0
    assert "devices: machineA" in a.salon("relay", "status").stdout


# ---------------------------------------------------------------- restarts


def test_a_relay_restart_and_a_bridge_restart_during_traffic_lose_and_duplicate_nothing(salons):
    a, b, relay = salons.a, salons.b, salons.relay
    tag = uuid.uuid4().hex[:8]
    per_side = 30
    sent = {"a": [], "b": []}

    def write(machine: Machine, key: str) -> None:
        for i in range(per_side):
            while True:  # B's daemon is down for a while: write once it answers
                try:
                    sent[key].append(salons.notify(machine, "load", f"{key} {tag} {i}")["id"])
                    break
                except (httpx.HTTPError, AssertionError):
                    time.sleep(0.05)

    writer_a = threading.Thread(target=write, args=(a, "a"))
    writer_a.start()
    eventually(lambda: len(sent["a"]) >= 10, what="A wrote 10")
    relay.daemon.stop()
    relay.daemon.start(timeout=90)
    eventually(lambda: len(sent["a"]) >= 20, what="A wrote 20")
    b.daemon.kill()  # the bridge dies without a word; its lease is left behind
    b.daemon.start(timeout=90)
    writer_b = threading.Thread(target=write, args=(b, "b"))
    writer_b.start()
    writer_a.join(120)
    writer_b.join(120)

    def landed(machine: Machine, key: str) -> int:
        return len(machine.entry_ids(f"{key} {tag} %"))

    eventually(lambda: landed(b, "a") >= per_side and landed(a, "b") >= per_side, timeout=60,
               what="every entry crossed")  # fmt: skip
    for machine, key in ((b, "a"), (a, "b")):
        ids = machine.entry_ids(f"{key} {tag} %")
        assert len(ids) == per_side
        assert set(ids) == {uuid.UUID(i).hex for i in sent[key]}
    on_relay = relay_envelope_ids(salons)
    assert len(on_relay) == len(set(on_relay))
    assert {uuid.UUID(i).hex for i in sent["a"] + sent["b"]} <= set(on_relay)


# ---------------------------------------------------------------- once, and one device less


def test_salon_relay_sync_pushes_and_pulls_once_then_exits(salons):
    c = salons.machine("cron")
    try:
        joined = c.salon(
            "join", salons.a.salon("invite", "team", "--for", "machineC").stdout.strip()
        )
        assert joined.returncode == 0, joined.stderr
        tag = uuid.uuid4().hex[:8]
        sent = salons.notify(salons.a, "api", f"for the cron machine {tag}")
        eventually(lambda: uuid.UUID(sent["id"]).hex in relay_envelope_ids(salons),
                   what="A's entry reached the relay")  # fmt: skip
        assert c.salon("join", "team", agent="ops", session="c0c0c0c0-0001").returncode == 0
        wrote = c.salon("send", "team", "FACT", f"from the cron machine {tag}", agent="ops",
                        session="c0c0c0c0-0001")  # fmt: skip
        assert wrote.returncode == 0, wrote.stderr

        synced = c.salon("relay", "sync")

        assert synced.returncode == 0, synced.stderr
        assert "team: 1 sent" in synced.stdout
        assert c.entry_ids(f"for the cron machine {tag}") == [uuid.UUID(sent["id"]).hex]
        eventually(lambda: salons.a.entry_ids(f"from the cron machine {tag}"),
                   what="C's entry landed on A")  # fmt: skip
        again = c.salon("relay", "sync", "--json")
        assert again.returncode == 0, again.stderr
        [room] = json.loads(again.stdout)["rooms"]
        assert (room["pushed"], room["landed"], room["error"]) == (0, 0, None)
        assert c.entry_ids(f"for the cron machine {tag}") == [uuid.UUID(sent["id"]).hex]
    finally:
        drop_store(c.env)


def test_a_new_invite_for_a_device_ends_its_old_token(salons):
    d = salons.machine("reinvited")
    try:
        first = salons.a.salon("invite", "team", "--for", "machineD").stdout.strip()
        assert d.salon("join", first).returncode == 0
        old = json.loads((d.cwd / "relay-keys.json").read_text())["rooms"]["team"]["token"]
        assert client.room_view(salons.relay.daemon.url, "team", old)["you"] == "machineD"

        again = salons.a.salon("invite", "team", "--for", "machineD")
        assert "replaces" in again.stderr
        assert d.salon("join", again.stdout.strip()).returncode == 0

        with pytest.raises(client.RelayError) as refused:
            client.room_view(salons.relay.daemon.url, "team", old)
        assert refused.value.status == 401
        assert d.salon("relay", "sync").returncode == 0
    finally:
        drop_store(d.env)


def test_revoking_one_device_ends_its_tokens_and_older_invites_and_spares_the_others(salons):
    f = salons.machine("revoked")
    try:
        joined = f.salon(
            "join", salons.a.salon("invite", "team", "--for", "machineF").stdout.strip()
        )
        assert joined.returncode == 0, joined.stderr
        assert f.salon("relay", "sync").returncode == 0
        older = salons.a.salon("invite", "team", "--for", "machineF").stdout.strip()

        revoked = salons.a.salon("relay", "revoke", "machineF")

        assert revoked.returncode == 0, revoked.stderr
        assert "machineF is revoked" in revoked.stdout
        refused = f.salon("relay", "sync")
        assert refused.returncode == 1
        assert "revoked" in refused.stderr and "Traceback" not in refused.stderr
        assert "revoked" in f.salon("rooms").stdout  # the error stays shown
        reused = f.salon("join", older)
        assert reused.returncode == 1 and "revoked" in reused.stderr
        # Everyone else carries on.
        tag = uuid.uuid4().hex[:8]
        salons.notify(salons.a, "api", f"after the revoke {tag}")
        eventually(lambda: salons.b.entry_ids(f"after the revoke {tag}"), what="B still reads")
        status = json.loads(salons.a.salon("relay", "status", "--json").stdout)
        [room] = [r for r in status["rooms"] if r["room"] == "team"]
        [gone] = [d for d in room["relay"]["devices"] if d["device"] == "machineF"]
        assert gone["revoked"] is not None
        # A new invite brings it back.
        fresh = salons.a.salon("invite", "team", "--for", "machineF").stdout.strip()
        assert f.salon("join", fresh).returncode == 0
        back = f.salon("relay", "sync")
        assert back.returncode == 0, back.stderr
        assert f.entry_ids(f"after the revoke {tag}")
        assert "last error" not in f.salon("rooms").stdout
    finally:
        drop_store(f.env)


def test_revoking_takes_the_operators_secret_and_a_known_device(salons):
    unknown = salons.a.salon("relay", "revoke", "machineZ")
    assert unknown.returncode == 1 and "no device 'machineZ'" in unknown.stderr
    elsewhere = salons.b.salon("relay", "revoke", "machineA")
    assert elsewhere.returncode == 1 and "secret" in elsewhere.stderr


# ---------------------------------------------------------------- a relay is only a relay


def test_the_relay_serves_its_api_and_healthz_and_nothing_else(salons):
    url = salons.relay.daemon.url
    assert httpx.get(f"{url}/relay/v1/").json()["relay"] == "agent-salon"
    assert httpx.get(f"{url}/healthz").status_code == 200
    for method, path in (("POST", "/notify?label=evil"), ("POST", "/mcp"), ("GET", "/admin/"),
                         ("GET", "/metrics"), ("GET", "/admin/live/stream")):  # fmt: skip
        answer = httpx.request(method, f"{url}{path}", json={"content": "plain text"})
        assert answer.status_code == 404, (path, answer.text)
        assert "/relay/v1/ and /healthz only" in answer.json()["error"]
    assert not salons.relay.rows("SELECT 1 FROM bus_entry WHERE content = 'plain text'")
    banner = salons.relay.daemon.log().partition("Press Ctrl-C")[0]
    assert f"relay API    : {url}/relay/v1/" in banner and f"health       : {url}/healthz" in banner
    for other in ("/mcp", "/notify", "/admin", "MCP endpoint", "webhook"):
        assert other not in banner


# ---------------------------------------------------------------- focus


def test_a_seats_focus_crosses_to_the_other_machine_and_agents_shows_it_there(salons):
    session = "f0c05f0c-0001"
    assert salons.a.salon("join", "team", agent="ui", session=session).returncode == 0
    declared = salons.a.salon("focus", "tidying the settings page", "--files", "web/settings.tsx",
                              agent="ui", session=session)  # fmt: skip
    assert declared.returncode == 0, declared.stderr

    def seen_on_b():
        shown = json.loads(salons.b.salon("agents", "--json").stdout)
        for agent in shown["agents"]:
            for seat in agent["seats"]:
                if seat["seat"] == "ui@machineA#f0c05f0c" and seat["focus"]:
                    return seat["focus"]
        return None

    focus = eventually(seen_on_b, what="B shows A's seat's focus")
    assert (focus["text"], focus["files"]) == ("tidying the settings page", ["web/settings.tsx"])


# ---------------------------------------------------------------- the operator's live flow


def test_the_live_flow_shows_a_seat_of_the_other_machine_as_decided_there_in_both_faces(salons):
    """`salon watch` and the admin's live stream on A show B's seat as `send` reports it:
    decided there, though A's ledger holds a woken row for it."""
    a, b = salons.a, salons.b
    assert b.salon("join", "team", agent="designer", session="de51de51-0001").returncode == 0
    remote = "designer@machineB#de51de51"
    eventually(lambda: a.rows("SELECT 1 FROM bus_seat WHERE name = ?", (remote,)),
               what=f"A knows {remote}")  # fmt: skip
    assert a.salon("join", "team", session="a5a5a5a5-0001").returncode == 0
    script = (
        "import django\n"
        "django.setup()\n"
        "from django.contrib.auth.models import User\n"
        "if not User.objects.filter(username='staff').exists():\n"
        f"    User.objects.create_superuser('staff', 'staff@example.com', {PASSWORD!r})\n"
    )
    run_django_script(a.env, script, a.cwd)
    tag = uuid.uuid4().hex[:8]
    watch = Watch(a.env, "team")
    try:
        with (
            staff_client(a.daemon.url) as staff,
            staff.stream("GET", "/admin/live/stream", timeout=stream_timeout()) as response,
        ):
            stream = events(response)
            read_until(stream, lambda got: got[-1].name == "ready", stretched(30))
            asked = a.salon("send", "team", "QUESTION", f"which palette? {tag}", "--to",
                            "designer@machineB", "--json", session="a5a5a5a5-0001")  # fmt: skip
            assert asked.returncode == 0, asked.stderr
            report = json.loads(asked.stdout)
            got = read_until(
                stream,
                lambda got: any(e.name == "entry" and tag in e.data["content"] for e in got),
                stretched(30),
            )
        [shown] = [e.data for e in got if e.name == "entry" and tag in e.data["content"]]
        line = ""
        while tag not in line:  # the first line of this entry (other tests' may come first)
            [line] = watch.next_lines(1, 30)
    finally:
        watch.interrupt()

    assert (report["wakes"], report["decidedThere"]) == ([], [remote])
    # A's ledger says woken: the flow read it as "wakes" before.
    assert a.rows(
        "SELECT woken FROM bus_wakedecision WHERE entry_id = ? AND seat_name = ?",
        (uuid.UUID(report["id"]).hex, remote),
    ) == [(1,)]
    assert (shown["wakes"], shown["waiting"], shown["quieted"]) == ([], [], [])
    assert shown["decidedThere"] == [remote]
    assert line.endswith(
        f"team QUESTION api#a5a5a5a5 → designer@machineB (decided there: {remote}): "
        f'"which palette? {tag}"'
    )
