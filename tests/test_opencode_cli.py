"""The real OpenCode against agent-salon, offline.

OpenCode runs `opencode run PROMPT --format json` with a HOME of its own and talks to a
scripted OpenAI-compatible stand-in on 127.0.0.1 (tests/opencode_cli); the project is
wired with `salon install --client opencode`, and the store is read back directly.
Another project's session (`api`, a plain `salon` command line with a session id) asks.
Skipped when OpenCode is not installed (tests/opencode_cli/install_opencode.sh, or
SALON_OPENCODE_BIN).
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent_cli_kit import (
    API_SESSION,
    CLAIM,
    FOCUS,
    QUESTION,
    answered_and_woke_the_asker,
    api,
    ask,
    asking_during,
    focused_claimed_and_listed,
    git,
    installed_project,
    seats,
    told_once,
)
from tests.opencode_cli.harness import OpenCodeHome, opencode_or_skip
from tests.opencode_cli.standin import Call, Request, StandIn, Text, mcp
from tests.support import run_salon, stretched

pytestmark = pytest.mark.slow


@pytest.fixture
def opencode() -> Path:
    return opencode_or_skip()


@pytest.fixture
def stand_in(request: pytest.FixtureRequest) -> Iterator[StandIn]:
    script = getattr(request, "param", [])
    with StandIn(script) as server:
        yield server


@pytest.fixture
def home(tmp_path: Path, opencode: Path, stand_in: StandIn) -> OpenCodeHome:
    return OpenCodeHome(tmp_path / "home", stand_in.url, opencode)


@pytest.fixture
def project(tmp_path: Path, env: dict[str, str], home: OpenCodeHome) -> Path:
    return installed_project(tmp_path, home.env(env), "opencode")


def test_install_wires_the_server_and_the_plugin_and_opencode_connects(
    home: OpenCodeHome, project: Path, env: dict[str, str]
):
    done = home.run("mcp", "list", cwd=project, env=home.env(env), timeout=60)

    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert "salon" in said and "connected" in said.lower(), said
    assert seats(env) == []  # listing the server starts no session: no ghost seat
    config = json.loads((project / "opencode.json").read_text())
    [plugin] = config["plugin"]
    assert plugin.startswith("file://") and Path(plugin[len("file://") :]).is_file()
    assert git(project, "status", "--porcelain") == ""  # opencode.json is excluded


def test_the_first_prompt_offers_the_tools_and_names_the_sessions_seat(
    home: OpenCodeHome, project: Path, env: dict[str, str], stand_in: StandIn
):
    run = home.prompt("start", cwd=project, env=home.env(env))

    assert run.returncode == 0, run.stderr
    [(seat, client)] = seats(env)
    assert client == "opencode" and seat.startswith("web-app#ses_")
    first = stand_in.model_requests[0]
    assert {"salon_send", "salon_inbox", "salon_wait"} <= set(first.tool_names)
    assert f"this session is {seat}" in first.shown_text()


def test_a_claim_on_an_idle_opencode_session_is_told_with_its_next_prompt_once(
    home: OpenCodeHome, project: Path, env: dict[str, str], stand_in: StandIn, tmp_path: Path
):
    first = home.prompt("start", cwd=project, env=home.env(env))
    assert first.returncode == 0, first.stderr
    [(seat, _client)] = seats(env)

    report = ask(env, tmp_path)
    # `opencode run` has ended (its exit signed the seat off): the entry waits for it.
    assert report["wakes"] == []
    assert not stand_in.seen(QUESTION)

    again = home.prompt("carry on", cwd=project, env=home.env(env), session=first.session_id)
    assert again.returncode == 0, again.stderr
    assert again.session_id == first.session_id
    told_once(stand_in)
    assert seats(env) == [(seat, "opencode")]  # the resumed session keeps its seat


def test_a_claim_written_during_a_turn_is_told_in_the_next_tool_result_once(
    home: OpenCodeHome, project: Path, env: dict[str, str], stand_in: StandIn, tmp_path: Path
):
    asked = []

    def model(request: Request):
        if not asked:  # the question arrives while the turn runs; then a tool is called
            asked.append(ask(env, tmp_path))
            return Call("read", {"filePath": str(project / "src" / "app.py")})
        return Text("read it" if QUESTION in request.shown_text() else "nothing new")

    stand_in.use(model)
    run = home.prompt("work", cwd=project, env=home.env(env))

    assert run.returncode == 0, run.stderr
    [(seat, _client)] = seats(env)
    assert asked[0]["wakes"] == [seat] and asked[0]["toldAtNextTurn"] == [seat]
    told_once(stand_in)
    assert QUESTION in stand_in.model_requests[-1].last_output()  # with the file it read
    assert "PORT = 8080" in stand_in.model_requests[-1].last_output()
    assert run.texts()[-1] == "read it"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_under_opencode_serve_a_claim_written_during_a_turn_starts_one_more_turn(
    home: OpenCodeHome, project: Path, env: dict[str, str], stand_in: StandIn, tmp_path: Path
):
    asked = []

    def model(request: Request) -> Text:
        if not asked:
            asked.append(ask(env, tmp_path))
            return Text("working")
        return Text("read it" if QUESTION in request.shown_text() else "nothing new")

    stand_in.use(model)
    port = free_port()
    server = home.start("serve", "--port", str(port), "--hostname", "127.0.0.1",
                        cwd=project, env=home.env(env))  # fmt: skip
    try:
        deadline = time.monotonic() + stretched(60)
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        run = home.prompt("work", cwd=project, env=home.env(env),
                          attach=f"http://127.0.0.1:{port}")  # fmt: skip
        assert run.returncode == 0, run.stderr
        deadline = time.monotonic() + stretched(60)
        while len(stand_in.model_requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(stretched(2))  # no third turn comes
    finally:
        server.terminate()
        server.wait(timeout=stretched(30))

    told_once(stand_in)
    held = stand_in.model_requests[1]
    assert "Read the inbox before you stop" in held.shown_text()
    assert len(stand_in.model_requests) == 2  # one more turn, not a loop


def test_a_session_that_starts_after_the_claim_is_told_in_its_first_context(
    home: OpenCodeHome, project: Path, env: dict[str, str], stand_in: StandIn, tmp_path: Path
):
    first = home.prompt("hello", cwd=project, env=home.env(env))
    assert first.returncode == 0, first.stderr
    ask(env, tmp_path)

    run = home.prompt("a new session", cwd=project, env=home.env(env))

    assert run.returncode == 0, run.stderr
    assert run.session_id != first.session_id
    assert len(seats(env)) == 2
    told_once(stand_in)
    assert stand_in.model_requests[1].count(QUESTION) == 1  # the new session's first request


def test_the_opencode_sessions_answer_with_re_wakes_the_asking_session(
    home: OpenCodeHome, project: Path, env: dict[str, str], stand_in: StandIn, tmp_path: Path
):
    first = home.prompt("hello", cwd=project, env=home.env(env))
    assert first.returncode == 0, first.stderr
    question = ask(env, tmp_path)
    answer = {"room": "team", "type": "ANSWER", "text": "8443.", "re": question["id"]}
    stand_in.use([mcp("send", answer), Text("answered")])

    run = home.prompt("answer what you are asked", cwd=project, env=home.env(env))

    assert run.returncode == 0, run.stderr
    told_once(stand_in)
    [tool] = run.tool_parts()
    assert tool["state"]["status"] == "completed", tool
    answered_and_woke_the_asker(env, tmp_path, question)


@pytest.mark.parametrize(
    "stand_in",
    [[mcp("focus", FOCUS), mcp("claim", CLAIM), mcp("agents"), Text("done")]],
    indirect=True,
)  # fmt: skip
def test_the_focus_claim_and_agents_tools_act_as_the_sessions_own_seat(
    home: OpenCodeHome, project: Path, env: dict[str, str], stand_in: StandIn
):
    run = home.prompt("focus, claim, list", cwd=project, env=home.env(env))

    assert run.returncode == 0, run.stderr
    [(seat, _client)] = seats(env)
    listed = stand_in.model_requests[-1].last_output()
    focused_claimed_and_listed(env, seat, listed, "opencode")


def test_the_search_tool_finds_the_rooms_entries(
    home: OpenCodeHome, project: Path, env: dict[str, str], stand_in: StandIn, tmp_path: Path
):
    said = api(env, tmp_path, "send", "team", "FACT", QUESTION)  # no one is addressed
    assert said.returncode == 0, said.stderr
    stand_in.use([mcp("search", {"query": "staging"}), Text("found")])

    run = home.prompt("look it up", cwd=project, env=home.env(env))

    assert run.returncode == 0, run.stderr
    assert QUESTION in stand_in.model_requests[-1].last_output()


def test_the_wait_tool_returns_the_question_asked_while_it_waits(
    home: OpenCodeHome, project: Path, env: dict[str, str], stand_in: StandIn, tmp_path: Path
):
    wait = mcp("wait", {"room": "team", "timeout": 60})
    model = asking_during([wait, Text("got it")], lambda reply: reply is wait, env, tmp_path,
                          Text("done."))  # fmt: skip
    stand_in.use(model)

    run = home.prompt("wait for a question", cwd=project, env=home.env(env))

    assert run.returncode == 0, run.stderr
    [(seat, _client)] = seats(env)
    assert model.reports[0]["wakes"] == [seat]
    assert QUESTION in stand_in.model_requests[-1].last_output()  # the wait's result
    told_once(stand_in)


def test_a_write_to_a_file_another_session_claims_is_held_back(
    home: OpenCodeHome, project: Path, env: dict[str, str], stand_in: StandIn
):
    other = {**env, "AGENT_SALON_NAME": "web-app", "CLAUDE_CODE_SESSION_ID": API_SESSION,
             "AGENT_SALON_ROOM": "team"}  # fmt: skip
    done = run_salon("claim", "src/app.py", "--note", "moving the port", env=other, cwd=project)
    assert done.returncode == 0, done.stderr
    target = str(project / "src" / "app.py")
    stand_in.use([Call("write", {"filePath": target, "content": "PORT = 9090\n"}),
                  Text("held back")])  # fmt: skip

    run = home.prompt("change the port", cwd=project, env=home.env(env))

    assert run.returncode == 0, run.stderr
    assert (project / "src" / "app.py").read_text() == "PORT = 8080\n"
    said = stand_in.model_requests[-1].last_output()
    assert "src/app.py is claimed by another session" in said, said
    assert "moving the port" in said


def test_uninstall_leaves_git_status_as_it_was(
    home: OpenCodeHome, project: Path, env: dict[str, str]
):
    plugin = json.loads((project / "opencode.json").read_text())["plugin"][0][len("file://") :]

    done = run_salon("uninstall", "--client", "opencode", env=home.env(env), cwd=project)

    assert done.returncode == 0, done.stderr
    assert git(project, "status", "--porcelain", "--ignored") == ""
    assert not (project / "opencode.json").exists()
    assert not Path(plugin).exists()
