"""The real Gemini CLI against agent-salon, offline.

Gemini runs `gemini -p PROMPT -o json` with a HOME of its own and talks to a scripted
Gemini API stand-in on 127.0.0.1 (tests/gemini_cli); the project is wired with `salon
install --client gemini`, and the store is read back directly. Another project's session
(`api`, a plain `salon` command line with a session id) asks. Skipped when the CLI is
not installed (tests/gemini_cli/install_gemini.sh, or SALON_GEMINI_BIN).
"""

from __future__ import annotations

import json
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
from tests.gemini_cli.harness import GeminiHome, gemini_or_skip
from tests.gemini_cli.standin import Call, Request, StandIn, Text, mcp
from tests.support import run_salon

pytestmark = pytest.mark.slow


@pytest.fixture
def gemini() -> Path:
    return gemini_or_skip()


@pytest.fixture
def stand_in(request: pytest.FixtureRequest) -> Iterator[StandIn]:
    script = getattr(request, "param", [])
    with StandIn(script) as server:
        yield server


@pytest.fixture
def home(tmp_path: Path, gemini: Path, stand_in: StandIn) -> GeminiHome:
    return GeminiHome(tmp_path / "home", stand_in.url, gemini)


@pytest.fixture
def project(tmp_path: Path, env: dict[str, str], home: GeminiHome) -> Path:
    return installed_project(tmp_path, home.env(env), "gemini")


def test_install_trusts_the_folder_and_gemini_connects_to_the_salon_server(
    home: GeminiHome, project: Path, env: dict[str, str]
):
    done = home.run("mcp", "list", cwd=project, env=home.env(env), timeout=60)

    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr  # Gemini writes the list to stderr
    assert "salon" in said and "Connected" in said, said
    assert "Blocked" not in said  # no variable Gemini refuses to set for the server
    assert seats(env) == []  # listing the server starts no session: no ghost seat
    trusted = json.loads(home.trusted_folders.read_text())
    assert trusted == {str(project): "TRUST_FOLDER"}


def test_the_first_prompt_offers_the_tools_and_names_the_sessions_seat(
    home: GeminiHome, project: Path, env: dict[str, str], stand_in: StandIn
):
    run = home.prompt("start", cwd=project, env=home.env(env))

    assert run.returncode == 0, run.stderr
    [(seat, client)] = seats(env)
    assert (seat, client) == (f"web-app#{run.session_id[:8]}", "gemini")
    first = stand_in.model_requests[0]
    assert {"mcp_salon_send", "mcp_salon_inbox", "mcp_salon_wait"} <= set(first.tool_names)
    assert f"this session is {seat}" in first.shown_text()


def test_a_claim_on_an_idle_gemini_session_is_told_with_its_next_prompt_once(
    home: GeminiHome, project: Path, env: dict[str, str], stand_in: StandIn, tmp_path: Path
):
    first = home.prompt("start", cwd=project, env=home.env(env))
    assert first.returncode == 0, first.stderr
    [(seat, _client)] = seats(env)

    report = ask(env, tmp_path)
    # The headless run has ended (SessionEnd signed the seat off): the entry waits for it.
    assert report["wakes"] == []
    assert any("no live session" in notice for notice in report["notice"])
    assert not stand_in.seen(QUESTION)

    again = home.prompt("carry on", cwd=project, env=home.env(env), resume=first.session_id)
    assert again.returncode == 0, again.stderr
    assert again.session_id == first.session_id
    told_once(stand_in)
    assert seats(env) == [(seat, "gemini")]  # the resumed session keeps its seat
    assert "`inbox` tool" in stand_in.model_requests[-1].shown_text()


def test_a_claim_written_during_a_turn_starts_one_more_turn_at_its_end(
    home: GeminiHome, project: Path, env: dict[str, str], stand_in: StandIn, tmp_path: Path
):
    asked = []

    def model(request: Request) -> Text:
        if not asked:  # the question arrives while the turn runs
            asked.append(ask(env, tmp_path))
            return Text("working")
        return Text("read it" if QUESTION in request.shown_text() else "nothing new")

    stand_in.use(model)
    run = home.prompt("work", cwd=project, env=home.env(env))

    assert run.returncode == 0, run.stderr
    [(seat, _client)] = seats(env)
    # Live, but nothing can start a turn in it: told when its turn ends.
    assert asked[0]["wakes"] == [seat] and asked[0]["toldAtNextTurn"] == [seat]
    told_once(stand_in)
    assert "read it" in run.response
    held = next(r for r in stand_in.model_requests if r.count(QUESTION))
    assert "Read the inbox before you stop" in held.shown_text()
    # AfterAgent held the turn once: the model answered twice, not again after it was told.
    assert len(stand_in.model_requests) == 2


def test_a_session_that_starts_after_the_claim_is_told_in_its_first_context(
    home: GeminiHome, project: Path, env: dict[str, str], stand_in: StandIn, tmp_path: Path
):
    first = home.prompt("hello", cwd=project, env=home.env(env))
    assert first.returncode == 0, first.stderr
    ask(env, tmp_path)  # the first session has ended (SessionEnd signed its seat off)

    run = home.prompt("a new session", cwd=project, env=home.env(env))

    assert run.returncode == 0, run.stderr
    assert run.session_id != first.session_id
    assert len(seats(env)) == 2
    told_once(stand_in)
    assert stand_in.model_requests[1].count(QUESTION) == 1  # the new session's first request


@pytest.mark.parametrize(
    "stand_in", [[Text("ready"), mcp("inbox", {"room": "team"}), Text("done")]], indirect=True
)
def test_the_inbox_tool_answers_as_the_sessions_own_seat(
    home: GeminiHome, project: Path, env: dict[str, str], stand_in: StandIn, tmp_path: Path
):
    first = home.prompt("start", cwd=project, env=home.env(env))
    ask(env, tmp_path)

    run = home.prompt("read", cwd=project, env=home.env(env), resume=first.session_id)

    assert run.returncode == 0, run.stderr
    [(_seat, client)] = seats(env)  # the hooks' seat and the MCP server's are one
    assert client == "gemini"
    assert QUESTION in stand_in.model_requests[-1].last_output()


def test_the_gemini_sessions_answer_with_re_wakes_the_asking_session(
    home: GeminiHome, project: Path, env: dict[str, str], stand_in: StandIn, tmp_path: Path
):
    first = home.prompt("hello", cwd=project, env=home.env(env))
    assert first.returncode == 0, first.stderr
    question = ask(env, tmp_path)
    answer = {"room": "team", "type": "ANSWER", "text": "8443.", "re": question["id"]}
    stand_in.use([mcp("send", answer), Text("answered")])

    run = home.prompt("answer what you are asked", cwd=project, env=home.env(env))

    assert run.returncode == 0, run.stderr
    told_once(stand_in)
    answered_and_woke_the_asker(env, tmp_path, question)


@pytest.mark.parametrize(
    "stand_in",
    [[mcp("focus", FOCUS), mcp("claim", CLAIM), mcp("agents"), Text("done")]],
    indirect=True,
)  # fmt: skip
def test_the_focus_claim_and_agents_tools_act_as_the_sessions_own_seat(
    home: GeminiHome, project: Path, env: dict[str, str], stand_in: StandIn
):
    run = home.prompt("focus, claim, list", cwd=project, env=home.env(env))

    assert run.returncode == 0, run.stderr
    [(seat, _client)] = seats(env)
    listed = stand_in.model_requests[-1].last_output()
    focused_claimed_and_listed(env, seat, listed, "gemini")


def test_the_search_tool_finds_the_rooms_entries(
    home: GeminiHome, project: Path, env: dict[str, str], stand_in: StandIn, tmp_path: Path
):
    said = api(env, tmp_path, "send", "team", "FACT", QUESTION)  # no one is addressed
    assert said.returncode == 0, said.stderr
    stand_in.use([mcp("search", {"query": "staging"}), Text("found")])

    run = home.prompt("look it up", cwd=project, env=home.env(env))

    assert run.returncode == 0, run.stderr
    assert QUESTION in stand_in.model_requests[-1].last_output()


def test_the_wait_tool_returns_the_question_asked_while_it_waits(
    home: GeminiHome, project: Path, env: dict[str, str], stand_in: StandIn, tmp_path: Path
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
    home: GeminiHome, project: Path, env: dict[str, str], stand_in: StandIn
):
    other = {**env, "AGENT_SALON_NAME": "web-app", "CLAUDE_CODE_SESSION_ID": API_SESSION,
             "AGENT_SALON_ROOM": "team"}  # fmt: skip
    done = run_salon("claim", "src/app.py", "--note", "moving the port", env=other, cwd=project)
    assert done.returncode == 0, done.stderr
    target = str(project / "src" / "app.py")
    stand_in.use([Call("write_file", {"file_path": target, "content": "PORT = 9090\n"}),
                  Text("held back")])  # fmt: skip

    run = home.prompt("change the port", cwd=project, env=home.env(env), edits=True)

    assert run.returncode == 0, run.stderr
    assert (project / "src" / "app.py").read_text() == "PORT = 8080\n"
    said = stand_in.model_requests[-1].last_output()
    assert "src/app.py is claimed by another session" in said, said
    assert "moving the port" in said


def test_uninstall_leaves_git_status_as_it_was(
    home: GeminiHome, project: Path, env: dict[str, str]
):
    assert git(project, "status", "--porcelain") == ""  # the machine's file is excluded

    done = run_salon("uninstall", "--client", "gemini", env=home.env(env), cwd=project)

    assert done.returncode == 0, done.stderr
    assert git(project, "status", "--porcelain", "--ignored") == ""
    assert not (project / ".gemini").exists()
    assert not home.trusted_folders.exists() or str(project) not in home.trusted_folders.read_text()
