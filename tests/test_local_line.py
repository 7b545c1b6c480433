"""The local line (salond/line.py): hooks and bus commands have a running `salon mcp`
or `salon serve` of their store do the work, and do it themselves when none answers.

To prove which process did the work, the hook or command is run with a `django` package
on its PYTHONPATH that refuses to import: one that needed its own ORM would fail (a hook
prints nothing and logs the ImportError), so a correct answer can only have come over
the line.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from salond import line as local
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
def env(env, short_tmp):
    """The store of the `env` fixture, with a TMPDIR of this test's own (where the hook
    line's sockets and the heartbeat stamps live) and this agent's default room."""
    return dict(env, TMPDIR=short_tmp, AGENT_SALON_ROOM="team")


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
    return sorted(runtime_dir(env).glob("line-*.sock"))


def wait_for_socket(env, process, timeout=30.0) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = sockets(env)
        if found:
            return found[0]
        assert process.poll() is None, process.stderr.read()
        time.sleep(0.05)
    raise AssertionError("no line socket appeared")


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "claude-code", "version": "2.1.332"},
    },
}


def stdio_server(env, cwd: Path, session: str, **extra) -> subprocess.Popen:
    """`salon mcp` as Claude Code starts it for another session of this store: its first
    line is `initialize` (answered before Django loads); the line listens from then on,
    before any seat exists."""
    process = subprocess.Popen(
        salon_cmd("mcp"),
        env={**env, "CLAUDE_CODE_SESSION_ID": session, **extra},
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    process.stdin.write(json.dumps(INITIALIZE) + "\n")
    process.stdin.flush()
    return process


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


# What a process Claude Code starts on every turn and tool call costs is mostly what it
# imports; over a running server a hook or a command needs none of these (each a few ms).
NOT_FOR_A_SERVED_PROCESS = {
    "django", "asyncio", "typing", "logging", "subprocess", "concurrent", "dataclasses",
    "pathlib", "urllib", "ipaddress", "shutil", "bz2", "lzma", "difflib",
}  # fmt: skip


def imported(stderr: str) -> set[str]:
    """The top-level modules a process run with PYTHONPROFILEIMPORTTIME=1 imported."""
    return {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def test_hooks_and_a_command_answered_by_a_server_import_nothing_they_do_not_use(
    env, webdir, server
):
    the_team(env, webdir)
    profiled = {**env, "PYTHONPROFILEIMPORTTIME": "1"}
    runs = {
        kind: hook(profiled, kind, WEB_SESSION, webdir) for kind in ("session-start", "heartbeat")
    }
    send(env, api, "team", "QUESTION", "who owns the login form?")  # the Stop hook blocks on it
    runs["stop"] = hook(profiled, "stop", WEB_SESSION, webdir)
    runs["send"] = as_web(profiled, "send", "team", "FACT", "profiled")
    runs["session-end"] = hook(profiled, "session-end", WEB_SESSION, webdir)

    assert runs["stop"].stdout and json.loads(runs["stop"].stdout)["decision"] == "block"
    assert runs["send"].returncode == 0
    for name, run in runs.items():
        modules = imported(run.stderr)
        assert "json" in modules, name  # the profile is really there
        assert not modules & NOT_FOR_A_SERVED_PROCESS, (name, modules & NOT_FOR_A_SERVED_PROCESS)


def test_a_default_store_spelt_oddly_is_still_answered_by_its_running_server(
    env, tmp_path, no_django
):
    """A command and a server name the store by the one string salon.store gives them
    (settings.STORE): an XDG_DATA_HOME with `//` and `/./` in it, which pathlib would
    have tidied on one side only, still leads the command to the server's line."""
    data_home = tmp_path / "home" / "data"
    data_home.mkdir(parents=True)
    default = {k: v for k, v in env.items() if k != "AGENT_SALON_DB"}
    default.update(HOME=str(tmp_path / "home"), XDG_DATA_HOME=f"{tmp_path}//home/./data/")
    ok(salon(default, "migrate", "--verbosity", "0"))
    process = stdio_server(default, project(tmp_path, "docs-site"), "0dd50000-0000-4000-8000-0")
    try:
        wait_for_socket(default, process)
        # No Django in the command's process: only the server can have answered.
        done = salon({**default, **no_django}, "rooms", "--create", "odd")
        assert done.returncode == 0, done.stderr
        assert "odd" in ok(salon(default, "rooms")).stdout
        if not default.get("DATABASE_URL"):  # SQLite: the store is where the odd path says
            assert (data_home / "agent-salon" / "salon.db").exists()
    finally:
        process.stdin.close()
        process.wait(15)


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
    assert [Path(p) for p in local.servers(store_of(env))] == sockets(env)
    assert len(sockets(env)) == 1
    assert local.servers(other) == []


def line_warning(env, cwd: Path, session: str) -> str:
    """What a `salon mcp` that serves no hook line says on stderr, up to the warning's end."""
    process = stdio_server(env, cwd, session)
    try:
        deadline = time.monotonic() + 30
        warning = ""
        while time.monotonic() < deadline and "hooks will not use this process" not in warning:
            warning += process.stderr.readline()
        assert "(they still work, more slowly)" in warning
        return warning
    finally:
        process.stdin.close()
        process.wait(15)


def test_a_runtime_directory_open_to_others_is_neither_served_nor_used(
    env, webdir, tmp_path, no_django
):
    runtime_dir(env).mkdir(mode=0o755)
    runtime_dir(env).chmod(0o755)
    warning = line_warning(env, project(tmp_path, "docs-site"), "open0000-0000-4000-8000-0")
    assert "not a private directory" in warning
    assert sockets(env) == []
    # A socket planted there is not trusted either: the hook goes its own way (and, with
    # no Django, can only fail quietly) instead of printing what the planted one says.
    the_team(env, webdir)
    send(env, api, "team", "QUESTION", "anyone?")
    planted = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    planted.bind(str(runtime_dir(env) / f"line-{local.store_key(store_of(env))}-1.sock"))
    planted.listen(1)
    forged = b'{"ok": true, "result": {"output": {"decision": "block", "reason": "forged"}}}'

    def answer_once():
        with contextlib.suppress(OSError):  # closed unused at the end of the test
            connection, _ = planted.accept()
            with connection:
                connection.sendall(local.GREETING + forged)

    threading.Thread(target=answer_once, daemon=True).start()
    try:
        assert hook_json(hook({**env, **no_django}, "stop", WEB_SESSION, webdir)) is None
    finally:
        planted.close()
    assert "this hook may not load Django" in hook_log(env, webdir)


def test_a_runtime_directory_too_deep_for_a_socket_is_named_with_what_to_do(env, webdir, tmp_path):
    deep = Path(env["TMPDIR"]) / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    env = {**env, "TMPDIR": str(deep)}
    warning = line_warning(env, project(tmp_path, "docs-site"), "deep0000-0000-4000-8000-0")
    assert "longer than a socket's 107: set TMPDIR to a shorter directory" in warning
    assert "not a private directory" not in warning
    assert sockets(env) == []
    # The commands still work, on the store themselves.
    the_team(env, webdir)
    send(env, api, "team", "QUESTION", "anyone down there?")
    assert hook_json(hook(env, "stop", WEB_SESSION, webdir))["decision"] == "block"


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


# ---------------------------------------------------------------- the bus commands
# A running server answers a `salon COMMAND` request; the `salon` process itself never
# loads Django then.


def as_web(env, *args, stdin="", **extra):
    return subprocess.run(
        salon_cmd(*args),
        env={**env, "AGENT_SALON_NAME": "web-app", "CLAUDE_CODE_SESSION_ID": WEB_SESSION, **extra},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_command_runs_in_a_server_as_the_caller_without_django_in_the_caller(
    env, server, no_django
):
    ok(salon(env, "rooms", "--create", "team"))
    ok(as_web(env, "join", "team", **no_django))
    done = ok(as_web(env, "send", "team", "FACT", "-", "--json", stdin="from stdin\n", **no_django))
    report = json.loads(done.stdout)
    assert report["from"] == WEB_SEAT  # the caller's identity, not the server's (docs-site)
    rows = query_store(env, "SELECT sender, content FROM bus_entry")
    assert rows == [(WEB_SEAT, "from stdin\n")] or rows == [(WEB_SEAT, "from stdin")]


def test_a_server_prints_exactly_what_a_cold_start_prints(env, server, tmp_path):
    ok(salon(env, "rooms", "--create", "team"))
    ok(as_web(env, "join", "team"))
    ok(api(env, "join", "team"))
    send(env, api, "team", "QUESTION", "who owns the login form?")
    served = ok(as_web(env, "peek", "team", "--json"))
    cold_tmp = tmp_path / "cold-tmp"  # no server can be found from here
    cold_tmp.mkdir()
    cold = ok(as_web(env, "peek", "team", "--json", TMPDIR=str(cold_tmp)))
    assert served.stdout == cold.stdout
    assert json.loads(served.stdout)["entries"]


def test_a_command_with_other_settings_is_answered_by_its_own_process(env, server, tmp_path):
    """The server's settings shape what it answers: a caller with others (here a shorter
    inbox clip) must not get the server's answer."""
    ok(salon(env, "rooms", "--create", "team"))
    ok(as_web(env, "join", "team"))
    ok(api(env, "join", "team"))
    send(env, api, "team", "FACT", "A first sentence. " + "and more words " * 20)
    clipped = json.loads(
        ok(as_web(env, "peek", "team", "--json", AGENT_SALON_INBOX_CHARS="40")).stdout
    )
    assert clipped["entries"][0]["clipped"] > 40


def test_refusals_and_usage_errors_keep_their_exit_status_and_one_line(env, server, no_django):
    refused = as_web(env, "send", "nope", "FACT", "x", **no_django)
    assert refused.returncode == 1
    assert refused.stderr.startswith("salon send: there is no room 'nope'")
    assert refused.stderr.count("\n") == 1
    usage = as_web(env, "send", "--bogus", **no_django)
    assert usage.returncode == 2
    assert "unrecognized arguments" in usage.stderr or "required" in usage.stderr
    bad = as_web(env, "rooms", AGENT_SALON_PORT="ninety")
    assert bad.returncode == 2
    assert "configuration error: AGENT_SALON_PORT='ninety'" in bad.stderr
    assert "Traceback" not in refused.stderr + usage.stderr + bad.stderr


def test_a_stopped_server_never_holds_a_command_up(env, server, tmp_path):
    """REGRESSION: 2026-12-01 — with the server process SIGSTOPped, `salon agents` never
    returned (a socket wait without a timeout)."""
    ok(salon(env, "rooms", "--create", "team"))
    ok(as_web(env, "join", "team"))
    server.send_signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        done = ok(as_web(env, "agents", "--json"))
        took = time.monotonic() - started
    finally:
        server.send_signal(signal.SIGCONT)
    # The stopped server's session never called a tool, so it has no seat to list.
    assert [a["agent"] for a in json.loads(done.stdout)["agents"]] == ["web-app"]
    assert took < 30


# ---------------------------------------------------------------- the local doorbell
# On SQLite a process that hosts no streams rings the servers of its store over the same
# sockets (bus.bell); their watcher rings its streams at once instead of at its poll.


def test_a_cli_send_rings_the_servers_of_its_store_over_their_sockets(env, webdir):
    if env.get("DATABASE_URL"):
        pytest.skip("SQLite's doorbell: on PostgreSQL a send rings with NOTIFY")
    the_team(env, webdir)
    runtime_dir(env).mkdir(mode=0o700, exist_ok=True)
    path = runtime_dir(env) / f"line-{local.store_key(store_of(env))}-{os.getpid()}.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    listener.settimeout(30)
    heard: list[bytes] = []

    def hear_one():
        # The command first asks it to run the send (it declines, as a server of other
        # settings would), then rings it once the send is committed here.
        while not heard:
            connection, _ = listener.accept()
            with connection:
                connection.sendall(local.GREETING)
                chunks = []
                while chunk := connection.recv(65536):
                    chunks.append(chunk)
                message = json.loads(b"".join(chunks))
                if "ring" in message:
                    heard.append(message)
                else:
                    connection.sendall(b'{"ok": false, "error": "declined"}')

    listening = threading.Thread(target=hear_one)
    listening.start()
    try:
        report = send(env, web, "team", "QUESTION", "who rotates the key?", "--to", "api-service")
        listening.join(30)
    finally:
        listener.close()
    ring = heard[0]["ring"]
    [(api_seat,)] = query_store(env, "SELECT id FROM bus_seat WHERE name = ?", (API_SEAT,))
    assert ring == {"entry": report["id"], "seats": [api_seat]}


def test_a_ring_arriving_on_the_line_is_handed_to_the_servers_listener(short_tmp, monkeypatch):
    import asyncio

    from salond.host import LineServer

    monkeypatch.setenv("TMPDIR", short_tmp)
    heard = []

    async def scenario():
        arrived = asyncio.Event()

        def hear(entry_id, seat_ids):
            heard.append((entry_id, sorted(seat_ids)))
            arrived.set()

        async def answer(request):
            return {"ok": True, "result": None}

        line = LineServer("/a/store.db", "key", answer, hear)
        path = await line.start()
        assert path is not None
        told = await asyncio.to_thread(local.ring, "/a/store.db", "0190-entry", [7, 3])
        await asyncio.wait_for(arrived.wait(), 10)
        await line.stop()
        return told, path

    told, path = asyncio.run(scenario())
    assert told == 1
    assert heard == [("0190-entry", [3, 7])]
    assert not Path(path).exists()


def test_ctrl_c_on_salon_stops_a_command_waiting_for_its_text(env, server, no_django):
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
        # A test run started in the background (`pytest &`) hands its children SIGINT
        # ignored; the user's Ctrl-C this test stands for reaches a foreground command.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        time.sleep(2)  # started and reading stdin
        assert waiting.poll() is None
        waiting.send_signal(signal.SIGINT)
        _, err = waiting.communicate(timeout=30)
    finally:
        if waiting.poll() is None:
            waiting.kill()
    assert waiting.returncode == 130, err  # as a cold `salon send` interrupted exits
    assert "Traceback" not in err
    assert query_store(env, "SELECT count(*) FROM bus_entry") == [(0,)]


def test_the_server_list_a_daemon_rings_sees_a_server_come_and_go(short_tmp, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(short_tmp))
    store = os.path.join(short_tmp, "salon.db")
    os.makedirs(local.runtime_dir(), mode=0o700)
    listed = local.ServerList(store)
    assert listed.current() == []

    path = local.socket_path(store, pid=4242)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    try:
        assert listed.current() == [path]  # made: the directory changed
        other = local.socket_path(os.path.join(short_tmp, "other.db"), pid=4243)
        Path(other).touch()
        assert listed.current() == [path]  # another store's server is not ours
    finally:
        server.close()
        os.unlink(path)
    assert listed.current() == []  # removed


def test_a_deeply_nested_request_on_the_line_is_answered_an_error_and_logged_in_one_line(
    env, server
):
    """REGRESSION: 2026-12-03 — `[` 100,000 times sent by a client of the same user made
    the server log a RecursionError traceback and answer nothing. Wanted: an answer that
    says no, and one line in the log."""
    path = sockets(env)[0]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(15)
        client.connect(str(path))
        assert client.recv(1) == local.GREETING
        client.sendall(b"[" * 100_000)
        client.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
    refusal = json.loads(answer)
    assert refusal["ok"] is False and "nested" in refusal["error"], refusal
    server.stdin.close()  # it ends on the end of its stdin
    server.wait(15)
    log = server.stderr.read()
    assert "Traceback" not in log and "RecursionError" not in log, log
    assert len([line for line in log.splitlines() if "nested" in line]) == 1, log


# ---------------------------------------------------------------- where


def test_a_checkout_and_the_installed_salon_see_the_same_servers_and_peek_uses_them(
    env, webdir, server, no_django, tmp_path
):
    """`manage.py where` in a checkout and `salon where` agree; a session's `salon mcp`
    is not a daemon; `manage.py peek` in the checkout is answered by a running server
    (its Django cannot load)."""
    the_team(env, webdir)
    send(env, api, "team", "FACT", "the login form is web-app's")
    checkout = tmp_path / "checkout"
    for package in ("bus", "mcpgate", "relay", "salon", "templates"):
        shutil.copytree(REPO / package, checkout / package, ignore=shutil.ignore_patterns("*.pyc"))
    shutil.copy(REPO / "manage.py", checkout / "manage.py")
    poison = no_django["PYTHONPATH"].split(os.pathsep)[0]
    in_checkout = {**env, "PYTHONPATH": os.pathsep.join([poison, str(checkout)])}

    def manage(*args, **extra):
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            env={**in_checkout, **extra},
            cwd=checkout,
            capture_output=True,
            text=True,
            timeout=60,
        )

    daemon = Daemon(env=env, cwd=tmp_path).start()
    try:
        wait_for = time.monotonic() + 30
        while len(sockets(env)) < 2 and time.monotonic() < wait_for:
            time.sleep(0.05)
        installed = json.loads(ok(salon(env, "where", "--json")).stdout)
        from_checkout = json.loads(ok(manage("where", "--json")).stdout)
        peeked = ok(
            manage(
                "peek", "team", "--json", AGENT_SALON_NAME="web-app",
                CLAUDE_CODE_SESSION_ID=WEB_SESSION,
            )
        )  # fmt: skip
    finally:
        daemon.stop()
    assert from_checkout == installed
    assert installed["servers"] == [daemon.process.pid]
    assert installed["stdio"] == [server.pid]
    [entry] = json.loads(peeked.stdout)["entries"]
    assert entry["content"] == "the login form is web-app's"
