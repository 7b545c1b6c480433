"""The hook line (bus/hookline.py): a hook with something to write has a running
`salon mcp` or `salon serve` of its store do it, and runs it itself when none answers.

To prove which process did the work, the hook is run with a `django` package on its
PYTHONPATH that refuses to import: a hook that needed its own ORM would print nothing
(and log the ImportError), so a correct answer can only have come over the line.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bus import hookline
from tests.claude_kit import (
    API_SEAT,
    WEB_SEAT,
    WEB_SESSION,
    api,
    hook,
    hook_input,
    hook_json,
    ok,
    project,
    rooms_of,
    salon,
    seat_row,
    send,
    web,
)
from tests.support import REPO, Daemon, query_store, salon_cmd

pytestmark = pytest.mark.slow


@pytest.fixture
def env(env, tmp_path):
    """The store of the `env` fixture, with a TMPDIR of this test's own (where the hook
    line's sockets and the heartbeat stamps live) and this agent's default room."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    return dict(env, TMPDIR=str(tmp), AGENT_SALON_ROOM="team")


@pytest.fixture
def webdir(tmp_path):
    return project(tmp_path, "web-app")


@pytest.fixture
def no_django(tmp_path):
    """A PYTHONPATH on which `import django` fails."""
    poison = tmp_path / "poison" / "django"
    poison.mkdir(parents=True)
    (poison / "__init__.py").write_text("raise ImportError('this hook may not load Django')\n")
    return {"PYTHONPATH": os.pathsep.join([str(poison.parent), str(REPO)])}


def runtime_dir(env) -> Path:
    return Path(env["TMPDIR"]) / f"agent-salon-{os.getuid()}"


def sockets(env) -> list[Path]:
    return sorted(runtime_dir(env).glob("hooks-*.sock"))


def wait_for_socket(env, process, timeout=30.0) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = sockets(env)
        if found:
            return found[0]
        assert process.poll() is None, process.stderr.read()
        time.sleep(0.05)
    raise AssertionError("no hook line socket appeared")


def stdio_server(env, cwd: Path, session: str, **extra) -> subprocess.Popen:
    """`salon mcp` as Claude Code starts it for another session of this store (no MCP
    handshake is needed: the line listens from the start)."""
    return subprocess.Popen(
        salon_cmd("mcp"),
        env={**env, "CLAUDE_CODE_SESSION_ID": session, **extra},
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def server(env, tmp_path):
    """A `salon mcp` of another project on this store, with other default rooms."""
    process = stdio_server(
        env,
        project(tmp_path, "docs-site"),
        "d0c5d0c5-0000-4000-8000-000000000002",
        AGENT_SALON_ROOM="elsewhere",
    )
    wait_for_socket(env, process)
    yield process
    process.stdin.close()
    process.wait(15)


def hook_log(env, webdir) -> str:
    logs = [*runtime_dir(env).glob("agent-salon-hooks.log")]
    logs += [*Path(env["AGENT_SALON_DB"]).parent.glob("agent-salon-hooks.log")]
    return "".join(path.read_text() for path in logs)


def the_team(env, webdir):
    ok(salon(env, "rooms", "--create", "team"))
    ok(web(env, "join", "team"))
    ok(web(env, "focus", "wiring the login form"))
    ok(api(env, "join", "team"))


def test_a_running_stdio_server_runs_the_blocking_stop_hook_without_django_in_the_hook(
    env, webdir, server, no_django
):
    the_team(env, webdir)
    send(env, api, "team", "QUESTION", "who owns the login form?")
    output = hook_json(hook({**env, **no_django}, "stop", WEB_SESSION, webdir))
    assert output is not None, hook_log(env, webdir)
    assert output["decision"] == "block"
    assert f'QUESTION from {API_SEAT} in "team": "who owns the login form?"' in output["reason"]
    # Claimed once: the same hook again (through the ORM this time) has nothing to say.
    assert hook_json(hook(env, "stop", WEB_SESSION, webdir)) is None
    assert "this hook may not load Django" not in hook_log(env, webdir)


def test_session_start_over_the_line_speaks_with_the_hooks_own_rooms_and_interpreter(
    env, webdir, server, no_django, tmp_path
):
    ok(salon(env, "rooms", "--create", "team"))
    ok(salon(env, "rooms", "--create", "elsewhere"))
    # The hook's interpreter under another name than the server's.
    python = tmp_path / "bin" / "python-of-the-hook"
    python.parent.mkdir()
    python.symlink_to(sys.executable)
    done = subprocess.run(
        [str(python), "-m", "salon.cli", "hook", "session-start"],
        env={**env, **no_django, "AGENT_SALON_HEADLESS": "0"},
        cwd=webdir,
        input=hook_input("session-start", WEB_SESSION, webdir),
        capture_output=True,
        text=True,
        timeout=60,
    )
    output = hook_json(done)
    assert output is not None, hook_log(env, webdir)
    text = output["hookSpecificOutput"]["additionalContext"]
    assert f"this session is {WEB_SEAT} on the bus (agent web-app; rooms: team)" in text
    assert rooms_of(env, WEB_SEAT) == ["team"]  # the hook's AGENT_SALON_ROOM, not the server's
    monitor = next(line.strip() for line in text.splitlines() if line.strip().endswith(" wait"))
    words = shlex.split(monitor)
    assert words[-4:] == [str(python), "-m", "salon.cli", "wait"]
    assigned = dict(word.split("=", 1) for word in words[:-4])
    assert assigned["AGENT_SALON_ROOM"] == "team"
    assert assigned["AGENT_SALON_NAME"] == "web-app"
    assert assigned["AGENT_SALON_DB"] == env["AGENT_SALON_DB"]


def test_a_due_heartbeat_over_the_line_writes_last_seen_and_the_stamp(
    env, webdir, server, no_django
):
    ok(salon(env, "rooms", "--create", "team"))
    assert hook_json(hook({**env, **no_django}, "heartbeat", WEB_SESSION, webdir)) is None
    assert seat_row(env, WEB_SEAT) is not None, hook_log(env, webdir)
    assert list(Path(env["TMPDIR"]).glob("agent-salon-*/beat-*"))


def test_a_killed_servers_socket_is_removed_and_the_hook_runs_itself(env, webdir, tmp_path):
    process = stdio_server(env, project(tmp_path, "docs-site"), "dead0000-0000-4000-8000-0")
    path = wait_for_socket(env, process)
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    assert path.exists()  # nobody tidied up after a SIGKILL
    the_team(env, webdir)
    send(env, api, "team", "QUESTION", "still there?")
    output = hook_json(hook(env, "stop", WEB_SESSION, webdir))
    assert output["decision"] == "block"
    assert not path.exists()


def store_of(env) -> str:
    return env.get("DATABASE_URL") or os.path.realpath(env["AGENT_SALON_DB"])


def test_a_server_of_another_store_is_never_asked(env, server, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", env["TMPDIR"])
    other = str(tmp_path / "other" / "salon.db")
    assert [Path(p) for p in hookline.candidates(store_of(env))] == sockets(env)
    assert len(sockets(env)) == 1
    assert hookline.candidates(other) == []


def test_a_runtime_directory_open_to_others_is_neither_served_nor_used(
    env, webdir, tmp_path, no_django
):
    runtime_dir(env).mkdir(mode=0o755)
    runtime_dir(env).chmod(0o755)
    process = stdio_server(env, project(tmp_path, "docs-site"), "open0000-0000-4000-8000-0")
    try:
        deadline = time.monotonic() + 30
        warning = ""
        while time.monotonic() < deadline and "not a private directory" not in warning:
            warning += process.stderr.readline()
        assert "hooks will not use this process" in warning
        assert sockets(env) == []
    finally:
        process.stdin.close()
        process.wait(15)
    # A socket planted there is not trusted either: the hook goes its own way (and, with
    # no Django, can only fail quietly) instead of printing what the planted one says.
    the_team(env, webdir)
    send(env, api, "team", "QUESTION", "anyone?")
    planted = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    planted.bind(str(runtime_dir(env) / f"hooks-{hookline.store_key(store_of(env))}-1.sock"))
    planted.listen(1)
    forged = b'{"ok": true, "output": {"decision": "block", "reason": "forged"}}'

    def answer_once():
        connection, _ = planted.accept()
        with connection:
            connection.sendall(forged)

    threading.Thread(target=answer_once, daemon=True).start()
    try:
        assert hook_json(hook({**env, **no_django}, "stop", WEB_SESSION, webdir)) is None
    finally:
        planted.close()
    assert "this hook may not load Django" in hook_log(env, webdir)


def test_salon_serve_answers_hooks_too(env, webdir, tmp_path, no_django):
    daemon = Daemon(env=env, cwd=tmp_path).start()
    try:
        the_team(env, webdir)
        send(env, api, "team", "REQUEST", "rotate the staging key", "--to", "web-app")
        output = hook_json(hook({**env, **no_django}, "stop", WEB_SESSION, webdir))
        assert output is not None, hook_log(env, webdir) + daemon.log()
        assert "REQUEST from" in output["reason"]
    finally:
        daemon.stop()
    assert sockets(env) == []  # an orderly stop removes its socket


# ---------------------------------------------------------------- the commands' fork server
# (salon/forkserver.py): a running server keeps a process with Django loaded that forks
# one child per `salon COMMAND`; the `salon` process itself never loads Django then.


def fork_servers(env) -> list[Path]:
    return sorted(runtime_dir(env).glob("cli-*.sock"))


def wait_for_fork_server(env, timeout=30.0) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if fork_servers(env):
            return fork_servers(env)[0]
        time.sleep(0.05)
    raise AssertionError("no fork server socket appeared")


def as_web(env, *args, stdin="", **extra):
    return subprocess.run(
        salon_cmd(*args),
        env={**env, "AGENT_SALON_NAME": "web-app", "CLAUDE_CODE_SESSION_ID": WEB_SESSION, **extra},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_command_runs_in_the_fork_server_as_the_caller_without_django_in_the_caller(
    env, server, no_django
):
    wait_for_fork_server(env)
    ok(salon(env, "rooms", "--create", "team"))
    ok(as_web(env, "join", "team", **no_django))
    done = ok(as_web(env, "send", "team", "FACT", "-", "--json", stdin="from stdin\n", **no_django))
    report = json.loads(done.stdout)
    assert report["from"] == WEB_SEAT  # the caller's identity, not the server's (docs-site)
    rows = query_store(env, "SELECT sender, content FROM bus_entry")
    assert rows == [(WEB_SEAT, "from stdin\n")] or rows == [(WEB_SEAT, "from stdin")]


def test_the_fork_server_prints_exactly_what_a_cold_start_prints(env, server, tmp_path):
    wait_for_fork_server(env)
    ok(salon(env, "rooms", "--create", "team"))
    ok(as_web(env, "join", "team"))
    ok(api(env, "join", "team"))
    send(env, api, "team", "QUESTION", "who owns the login form?")
    forked = ok(as_web(env, "peek", "team", "--json"))
    cold_tmp = tmp_path / "cold-tmp"  # no fork server can be found from here
    cold_tmp.mkdir()
    cold = ok(as_web(env, "peek", "team", "--json", TMPDIR=str(cold_tmp)))
    assert forked.stdout == cold.stdout
    assert json.loads(forked.stdout)["entries"]


def test_refusals_usage_errors_and_bad_settings_keep_their_exit_status_and_one_line(
    env, server, no_django
):
    wait_for_fork_server(env)
    refused = as_web(env, "send", "nope", "FACT", "x", **no_django)
    assert refused.returncode == 1
    assert refused.stderr.startswith("salon send: there is no room 'nope'")
    assert refused.stderr.count("\n") == 1
    usage = as_web(env, "send", "--bogus", **no_django)
    assert usage.returncode == 2
    assert "unrecognized arguments" in usage.stderr or "required" in usage.stderr
    bad = as_web(env, "rooms", AGENT_SALON_PORT="ninety", **no_django)
    assert bad.returncode == 2
    assert "configuration error: AGENT_SALON_PORT='ninety'" in bad.stderr
    assert "Traceback" not in refused.stderr + usage.stderr + bad.stderr


def test_one_fork_server_per_store_and_it_goes_when_the_last_server_goes(env, tmp_path):
    first = stdio_server(env, project(tmp_path, "docs-site"), "f1r50000-0000-4000-8000-0")
    second = stdio_server(env, project(tmp_path, "blog"), "5ec0d000-0000-4000-8000-0")
    try:
        wait_for_socket(env, first)
        path = wait_for_fork_server(env)
        while len(sockets(env)) < 2:
            time.sleep(0.05)
        # Both servers may start one at once; the one that loses the lock leaves.
        deadline = time.monotonic() + 20
        while len(fork_server_pids(env)) > 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(fork_server_pids(env)) == 1
        first.stdin.close()
        first.wait(15)
        time.sleep(hookline_idle() + 1)
        assert path.exists()  # the second server still uses it
    finally:
        second.stdin.close()
        second.wait(15)
    deadline = time.monotonic() + hookline_idle() + 10
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not path.exists()


def fork_server_pids(env) -> list[str]:
    running = subprocess.run(
        ["pgrep", "-f", "salon.forkserver"], capture_output=True, text=True
    ).stdout.split()
    return [pid for pid in running if _environ_of(pid).get("TMPDIR") == env["TMPDIR"]]


def hookline_idle() -> float:
    from salon import forkserver

    return forkserver.IDLE_CHECK_SECONDS


def _environ_of(pid: str) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(
        item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item
    )


# ---------------------------------------------------------------- the local doorbell
# On SQLite a process that hosts no streams rings the servers of its store over the same
# sockets (bus.doorbell); their watcher rings its streams at once instead of at its poll.


def test_a_cli_send_rings_the_servers_of_its_store_over_their_sockets(env, webdir):
    if env.get("DATABASE_URL"):
        pytest.skip("SQLite's doorbell: on PostgreSQL a CLI rings with pg_notify or Redis")
    the_team(env, webdir)
    runtime_dir(env).mkdir(mode=0o700, exist_ok=True)
    path = runtime_dir(env) / f"hooks-{hookline.store_key(store_of(env))}-{os.getpid()}.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    listener.settimeout(30)
    heard: list[bytes] = []

    def hear_one():
        connection, _ = listener.accept()
        with connection:
            chunks = []
            while chunk := connection.recv(65536):
                chunks.append(chunk)
            heard.append(b"".join(chunks))

    listening = threading.Thread(target=hear_one)
    listening.start()
    try:
        report = send(env, web, "team", "QUESTION", "who rotates the key?", "--to", "api-service")
        listening.join(30)
    finally:
        listener.close()
    ring = json.loads(heard[0])["ring"]
    [(api_seat,)] = query_store(env, "SELECT id FROM bus_seat WHERE name = ?", (API_SEAT,))
    assert ring == {"entry": report["id"], "seats": [api_seat]}


def test_a_ring_arriving_on_the_line_is_handed_to_the_process_ring_handler(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    heard = []
    arrived = threading.Event()

    def handler(entry_id, seat_ids):
        heard.append((entry_id, seat_ids))
        arrived.set()

    path = hookline.start(fork_server=False)
    assert path is not None
    hookline.on_ring(handler)
    try:
        told = hookline.ring_servers(hookline.own_store(), "0190-entry", [7, 3])
        assert told == 1
        assert arrived.wait(10)
    finally:
        hookline.on_ring(None)
        hookline.stop()
    assert heard == [("0190-entry", [3, 7])]
    assert not Path(path).exists()


def test_ctrl_c_on_salon_reaches_the_forked_command(env, server, no_django):
    wait_for_fork_server(env)
    ok(salon(env, "rooms", "--create", "team"))
    ok(as_web(env, "join", "team", **no_django))
    # `send … -` waits for its text on stdin: a command still running when Ctrl-C comes.
    waiting = subprocess.Popen(
        salon_cmd("send", "team", "FACT", "-"),
        env={
            **env,
            "AGENT_SALON_NAME": "web-app",
            "CLAUDE_CODE_SESSION_ID": WEB_SESSION,
            **no_django,
        },
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(2)  # connected, the child forked and reading stdin
        assert waiting.poll() is None
        waiting.send_signal(signal.SIGINT)
        _, err = waiting.communicate(timeout=30)
    finally:
        if waiting.poll() is None:
            waiting.kill()
    assert waiting.returncode == 130, err  # as a cold `salon send` interrupted exits
    assert "Traceback" not in err
    assert query_store(env, "SELECT count(*) FROM bus_entry") == [(0,)]
