"""On a shared machine, the daemon's TCP port serves its own user only (salon.gate,
salond.peers): a client run as another user id is refused on /mcp, /notify and the
admin, while the same calls as the daemon's user pass; AGENT_SALON_PEERS lets named
users in; where the owner cannot be read, every caller needs a token.

The other user is `nobody` (uid 65534), reached with `setpriv`: the suite runs as root in
CI. Without root or setpriv those tests skip, saying why."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

import httpx
import pytest

from salon.config import ConfigError, read
from salond import peers
from tests.support import Daemon, migrate, run_salon, salon_env

NOBODY = 65534

# A client in the standard library only (it runs as nobody, who cannot read the repo's
# caches): each request of argv[2] (JSON) to the base URL argv[1], printing
# [[status, body], ...] as JSON.
CLIENT = r"""
import http.client, json, sys
from urllib.parse import urlsplit
base = urlsplit(sys.argv[1])
out = []
for method, path, headers, body in json.loads(sys.argv[2]):
    conn = http.client.HTTPConnection(base.hostname, base.port, timeout=20)
    conn.request(method, path, body=body.encode() if body is not None else None, headers=headers)
    answer = conn.getresponse()
    out.append([answer.status, answer.read().decode("utf-8", "replace")])
    conn.close()
print(json.dumps(out))
"""

INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "peer-test", "version": "0"},
        },
    }
)
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
NOTE = json.dumps({"content": "hello from the peer test"})


def calls(label: str = "intruder", token: str | None = None) -> list:
    auth = {"authorization": f"Bearer {token}"} if token else {}
    return [
        ["POST", f"/mcp?label={label}", {**MCP_HEADERS, **auth}, INITIALIZE],
        ["POST", f"/notify?label={label}", {"content-type": "application/json", **auth}, NOTE],
        ["GET", "/admin/", {}, None],
        ["GET", "/admin/login/", {}, None],
        ["GET", "/healthz", {}, None],
    ]


def _python_for_nobody() -> str | None:
    for python in (sys.executable, "/usr/bin/python3"):
        probe = subprocess.run(
            [*_as_nobody(), python, "-I", "-c", "import os; print(os.getuid())"],
            capture_output=True,
            text=True,
            cwd="/",
        )
        if probe.returncode == 0 and probe.stdout.strip() == str(NOBODY):
            return python
    return None


def _as_nobody() -> list[str]:
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


@pytest.fixture(scope="module")
def nobody_python() -> str:
    if os.geteuid() != 0:
        pytest.skip("needs root, to run a client as another user (nobody) with setpriv")
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv (util-linux), to run a client as another user (nobody)")
    python = _python_for_nobody()
    if python is None:
        pytest.skip("no Python interpreter that the user nobody can run")
    return python


def run_client(url: str, requests: list, python: str | None = None) -> list:
    """The requests, made by a client process: as nobody when `python` is given, else as
    this user."""
    prefix = [*_as_nobody(), python] if python else [sys.executable]
    done = subprocess.run(
        [*prefix, "-I", "-c", CLIENT, url, json.dumps(requests)],
        capture_output=True,
        text=True,
        cwd="/",
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [(status, body) for status, body in json.loads(done.stdout)]


def start_daemon(tmp_path, **settings: str) -> Daemon:
    env = salon_env(tmp_path, **settings)
    migrate(env)
    return Daemon(env=env, cwd=tmp_path).start()


def refusals_logged(daemon: Daemon) -> list[str]:
    lines = daemon.log().splitlines()
    return [line for line in lines if "refused" in line and "local user" in line]


@pytest.mark.parametrize("lookup", ["auto", "proc"])
def test_another_local_user_is_refused_on_mcp_notify_and_admin_while_the_user_passes(
    tmp_path, nobody_python, lookup
):
    daemon = start_daemon(tmp_path, AGENT_SALON_PEER_LOOKUP=lookup)
    try:
        theirs = run_client(daemon.url, calls(), nobody_python)
        ours = run_client(daemon.url, calls("api"))
    finally:
        daemon.stop()
    mcp, notify, admin, login, health = theirs
    assert mcp[0] == 403 and "serves its own user only" in json.loads(mcp[1])["error"]["message"]
    assert notify[0] == 401 and "AGENT_SALON_PEERS" in json.loads(notify[1])["error"]
    assert admin[0] == 403 and login[0] == 403
    assert health[0] == 200  # says only that a daemon runs
    assert [status for status, _ in ours] == [200, 202, 302, 200, 200]
    logged = refusals_logged(daemon)
    assert len(logged) == 4, logged
    assert all(f"local user {NOBODY} (nobody)" in line for line in logged)
    assert "Traceback" not in daemon.log()


def test_nothing_the_refused_user_sent_reached_the_store(tmp_path, nobody_python):
    daemon = start_daemon(tmp_path)
    try:
        run_client(daemon.url, calls("intruder"), nobody_python)
        agents = run_salon("agents", "--json", env=daemon.env)
    finally:
        daemon.stop()
    assert agents.returncode == 0, agents.stderr
    assert "intruder" not in agents.stdout


@pytest.mark.parametrize("allowed", ["nobody", "65534", "@nogroup"])
def test_agent_salon_peers_lets_a_named_user_or_group_in(tmp_path, nobody_python, allowed):
    daemon = start_daemon(tmp_path, AGENT_SALON_PEERS=allowed)
    try:
        theirs = run_client(daemon.url, calls("teammate"), nobody_python)
    finally:
        daemon.stop()
    assert [status for status, _ in theirs] == [200, 202, 302, 200, 200]
    assert refusals_logged(daemon) == []


def _issue(env: dict, label: str) -> str:
    issued = run_salon("token", "issue", label, env=env)
    assert issued.returncode == 0, issued.stderr
    return issued.stdout.strip().split()[-1]


def test_when_the_owner_cannot_be_read_every_caller_needs_a_token(tmp_path):
    """AGENT_SALON_PEER_LOOKUP=off: the daemon reads nobody's owner (as on a system
    without the socket tables), so /mcp and /notify want a label's token from everyone,
    the daemon's own user too; with it they pass."""
    daemon = start_daemon(tmp_path, AGENT_SALON_PEER_LOOKUP="off")
    try:
        token = _issue(daemon.env, "api")
        bare = run_client(daemon.url, calls("web"))
        no_label = run_client(daemon.url, [["POST", "/mcp", MCP_HEADERS, INITIALIZE]])
        tokened = run_client(daemon.url, calls("api", token))
        wrong = run_client(daemon.url, calls("web", token))
        told = httpx.get(daemon.url + "/healthz").headers.get("x-salon-caller")
    finally:
        daemon.stop()
    assert bare[0][0] == 403 and "cannot tell which local user" in bare[0][1]
    assert bare[1][0] == 401 and "cannot tell which local user" in bare[1][1]
    assert bare[2][0] == 302  # the admin: its login stands
    assert no_label[0][0] == 403 and "?label=" in no_label[0][1]
    assert [status for status, _ in tokened][:2] == [200, 202]
    assert [status for status, _ in wrong][:2] == [403, 401]
    assert told == "unknown"  # what `salon install --http` asks
    assert "Traceback" not in daemon.log()


def test_the_owner_of_a_connection_is_read_from_the_kernel_by_both_sources():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        with socket.create_connection(listener.getsockname()):
            accepted, address = listener.accept()
            with accepted:
                server = accepted.getsockname()
                for source in ("auto", "netlink", "proc"):
                    assert peers.owner(address, server, source) == os.geteuid(), source
                assert peers.owner(address, server, "off") == peers.UNKNOWN
                # a socket that is not there has no owner
                assert peers.owner(("127.0.0.1", 1), server, "proc") == peers.UNKNOWN
    assert peers.owner(None, None) == peers.UNKNOWN
    assert peers.owner(("not an address", "x"), ("127.0.0.1", 1)) == peers.UNKNOWN
    assert peers.works() and not peers.works("off")


def test_an_unknown_user_or_group_or_lookup_in_the_settings_stops_start_up_naming_it():
    with pytest.raises(ConfigError, match="AGENT_SALON_PEERS: 'no-such-user-x'"):
        read({"AGENT_SALON_PEERS": "nobody,no-such-user-x"})
    with pytest.raises(ConfigError, match="no group 'no-such-group-x'"):
        read({"AGENT_SALON_PEERS": "@no-such-group-x"})
    with pytest.raises(ConfigError, match="AGENT_SALON_PEER_LOOKUP='sometimes'"):
        read({"AGENT_SALON_PEER_LOOKUP": "sometimes"})
    assert read({"AGENT_SALON_PEERS": "nobody, 4242"}).peers == {NOBODY, 4242}
    assert read({}).peers == frozenset() and read({}).peer_lookup == "auto"


def test_install_http_provisions_a_token_in_the_data_directory_where_the_owner_cannot_be_read(
    tmp_path,
):
    """Where the owner cannot be read, `salon install --http` issues the label a token,
    keeps it in the user's data directory (0600), never in a project file, and the
    entry's headers helper sends it: the entry's calls pass, the same without it not."""
    home = tmp_path / "home"
    home.mkdir()
    daemon = start_daemon(
        tmp_path, AGENT_SALON_PEER_LOOKUP="off", HOME=str(home), XDG_DATA_HOME=str(home / "xdg")
    )
    proj = tmp_path / "web-app"
    proj.mkdir()
    try:
        done = run_salon("install", "team", "--http", daemon.url, env=daemon.env, cwd=proj)
        again = run_salon("install", "team", "--http", daemon.url, env=daemon.env, cwd=proj)
        kept = home / "xdg" / "agent-salon" / "http-tokens.json"
        url = f"{daemon.url}/mcp?label=web-app&room=team"
        helper = subprocess.run(
            [*_salon(), "hook", "mcp-headers"],
            env={**daemon.env, "CLAUDE_CODE_MCP_SERVER_URL": url},
            capture_output=True,
            text=True,
            cwd=proj,
        )
        headers = json.loads(helper.stdout)
        token = headers.get("Authorization", "").removeprefix("Bearer ")
        with_it = run_client(daemon.url, calls("web-app", token)[:2])
        without = run_client(daemon.url, calls("web-app")[:2])
        elsewhere = subprocess.run(
            [*_salon(), "hook", "mcp-headers"],
            env={
                **daemon.env,
                "CLAUDE_CODE_MCP_SERVER_URL": "http://127.0.0.1:1/mcp?label=web-app",
            },
            capture_output=True,
            text=True,
            cwd=proj,
        )
    finally:
        daemon.stop()
    assert done.returncode == 0, done.stderr
    assert "token: the daemon cannot read which local user a connection is" in done.stdout
    assert "is issued in" in done.stdout and "is kept in" in again.stdout
    assert kept.stat().st_mode & 0o777 == 0o600
    assert token.startswith("salon_") and token in kept.read_text()
    for path in [*proj.rglob("*"), home / ".claude.json"]:
        if path.is_file():
            assert token not in path.read_text(errors="replace"), path
    assert [status for status, _ in with_it] == [200, 202]
    assert [status for status, _ in without] == [403, 401]
    assert json.loads(elsewhere.stdout) == {}  # a token goes to its own daemon only


def test_install_http_provisions_no_token_where_the_owner_is_read(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    daemon = start_daemon(tmp_path, HOME=str(home), XDG_DATA_HOME=str(home / "xdg"))
    proj = tmp_path / "web-app"
    proj.mkdir()
    try:
        done = run_salon("install", "team", "--http", daemon.url, env=daemon.env, cwd=proj)
        told = httpx.get(daemon.url + "/healthz").headers.get("x-salon-caller")
    finally:
        daemon.stop()
    assert done.returncode == 0, done.stderr
    assert told == "read"
    assert "token:" not in done.stdout
    assert not (home / "xdg" / "agent-salon" / "http-tokens.json").exists()


def _salon() -> list[str]:
    from tests.support import salon_cmd

    return salon_cmd()


def test_the_owner_is_looked_up_once_per_connection_not_per_request(tmp_path):
    daemon = start_daemon(tmp_path)
    try:
        with httpx.Client() as kept_alive:
            before = _lookups(kept_alive.get(daemon.url + "/metrics").text)
            for _ in range(5):
                assert kept_alive.get(daemon.url + "/healthz").status_code == 200
            after = _lookups(kept_alive.get(daemon.url + "/metrics").text)
        with httpx.Client() as another:
            other = _lookups(another.get(daemon.url + "/metrics").text)
    finally:
        daemon.stop()
    assert before >= 1 and after == before  # seven requests, one connection, one lookup
    assert other == before + 1


def _lookups(metrics: str) -> float:
    for line in metrics.splitlines():
        if line.startswith('salon_peer_lookups_total{found="admitted"}'):
            return float(line.split()[-1])
    return 0.0


def test_a_client_socket_closed_before_it_is_looked_up_has_no_owner_never_root():
    """The kernel reports a closed client socket (orphaned, or TIME_WAIT) with uid 0 and
    no inode: read as root's, a daemon running as root would let in whoever sent a
    request and closed at once. Such a socket's owner is UNKNOWN (tokens, then)."""
    import time

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        client = socket.create_connection(listener.getsockname())
        client.sendall(b"POST /notify HTTP/1.1\r\n\r\n")
        client.close()
        accepted, address = listener.accept()
        with accepted:
            time.sleep(0.2)  # the FIN has long been handled by the kernel
            for source in ("netlink", "proc"):
                assert peers.owner(address, accepted.getsockname(), source) == peers.UNKNOWN


def test_another_user_who_sends_a_request_and_closes_at_once_writes_nothing(
    tmp_path, nobody_python
):
    hit_and_run = r"""
import json, socket, sys
body = json.dumps({"content": "written by whoever closed first"}).encode()
head = b"POST /notify?label=racer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
head += b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
for _ in range(30):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    s.sendall(head + body)
    s.close()
"""
    daemon = start_daemon(tmp_path)
    try:
        done = subprocess.run(
            [*_as_nobody(), nobody_python, "-I", "-c", hit_and_run, str(daemon.port)],
            cwd="/",
            timeout=60,
        )
        assert done.returncode == 0
        health = httpx.get(daemon.url + "/healthz")  # after the 30 requests were read
        agents = run_salon("agents", "--json", env=daemon.env)
    finally:
        daemon.stop()
    assert health.status_code == 200
    assert "racer" not in agents.stdout
    assert "Traceback" not in daemon.log()


def test_who_may_connect_is_the_doors_business_not_the_bus_a_command_is_still_answered():
    """AGENT_SALON_PEERS and _PEER_LOOKUP shape the TCP door only: a command or hook whose
    environment lacks them (the daemon's came from a unit file) still has the daemon's
    settings key, so the daemon answers it over the local line."""
    from salon.config import settings_key

    plain = settings_key({"AGENT_SALON_DB": "/x/salon.db"})
    opened = {"AGENT_SALON_DB": "/x/salon.db", "AGENT_SALON_PEERS": "nobody"}
    assert settings_key({**opened, "AGENT_SALON_PEER_LOOKUP": "proc"}) == plain
