"""The real Codex CLI against agent-salon, offline.

Codex runs `codex exec` with a HOME and CODEX_HOME of its own and talks to a scripted
Responses API stand-in on 127.0.0.1 (tests/codex_cli); the project is wired with `salon
install --client codex`, and the store is read back directly. Another project's session
(`api`, a plain `salon` command line with a session id) asks. Skipped when the CLI is
not installed (tests/codex_cli/install_codex.sh, or SALON_CODEX_BIN).
"""

from __future__ import annotations

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
from tests.codex_cli.harness import CodexHome, codex_or_skip
from tests.codex_cli.standin import Patch, Request, StandIn, Text, mcp_turns
from tests.support import run_salon

pytestmark = pytest.mark.slow


@pytest.fixture
def codex() -> Path:
    return codex_or_skip()


@pytest.fixture
def stand_in(request: pytest.FixtureRequest) -> Iterator[StandIn]:
    script = getattr(request, "param", [])
    with StandIn(script) as server:
        yield server


@pytest.fixture
def home(tmp_path: Path, codex: Path, stand_in: StandIn) -> CodexHome:
    return CodexHome(tmp_path / "home", stand_in.url, codex)


@pytest.fixture
def project(tmp_path: Path, env: dict[str, str], home: CodexHome) -> Path:
    return installed_project(tmp_path, home.env(env), "codex")


def test_install_trusts_the_project_and_its_hooks_and_codex_lists_the_salon_server(
    home: CodexHome, project: Path, env: dict[str, str]
):
    done = home.run("mcp", "list", cwd=project, env=home.env(env), timeout=60)

    assert done.returncode == 0, done.stderr
    assert "salon" in done.stdout, done.stdout
    assert seats(env) == []  # listing the server starts no session: no ghost seat
    user = home.config_path.read_text()
    assert f'[projects."{project}"]  # agent-salon' in user
    assert user.count(f'[hooks.state."{project}/.codex/hooks.json:') == 5


@pytest.mark.parametrize("stand_in", [[Text("ready"), Text("seen")]], indirect=True)
def test_a_claim_on_an_idle_codex_session_is_told_with_its_next_prompt_once(
    home: CodexHome, project: Path, env: dict[str, str], stand_in: StandIn, tmp_path: Path
):
    first = home.exec("start", cwd=project, env=home.env(env))
    assert first.returncode == 0, first.stderr
    [(seat, client)] = seats(env)
    assert client == "codex"

    report = ask(env, tmp_path)
    # `codex exec` has ended (SessionEnd signed the seat off): the entry waits for it.
    assert report["wakes"] == []
    assert any("no live session" in notice for notice in report["notice"])
    assert not stand_in.seen(QUESTION)

    again = home.exec("carry on", cwd=project, env=home.env(env), resume=first.thread_id)
    assert again.returncode == 0, again.stderr
    told_once(stand_in)
    assert seats(env) == [(seat, "codex")]  # the resumed session keeps its seat
    last = stand_in.model_requests[-1]
    assert f"this session is {seat}" in last.shown_text()
    assert "`inbox` tool" in last.shown_text()


def test_a_claim_written_during_a_turn_holds_the_turn_once_at_its_end(
    home: CodexHome, project: Path, env: dict[str, str], stand_in: StandIn, tmp_path: Path
):
    asked = []

    def model(request: Request) -> Text:
        if not asked:  # the question arrives while the turn runs
            asked.append(ask(env, tmp_path))
            return Text("working")
        return Text("read it" if QUESTION in request.shown_text() else "nothing new")

    stand_in.use(model)
    run = home.exec("work", cwd=project, env=home.env(env))

    assert run.returncode == 0, run.stderr
    [(seat, _client)] = seats(env)
    # Live, but nothing can start a turn in it: told when its turn ends.
    assert asked[0]["wakes"] == [seat] and asked[0]["toldAtNextTurn"] == [seat]
    assert any("told at its next turn" in notice for notice in asked[0]["notice"])
    told_once(stand_in)
    assert [m["text"] for m in run.items("agent_message")][-1] == "read it"
    stop_said = next(r for r in stand_in.model_requests if r.count(QUESTION))
    assert "Read the inbox before you stop" in stop_said.shown_text()
    # The turn was held once: the model answered twice, not again after it was told.
    assert len(stand_in.model_requests) == 2


def test_a_session_that_starts_after_the_claim_is_told_in_its_first_context(
    home: CodexHome, project: Path, env: dict[str, str], stand_in: StandIn, tmp_path: Path
):
    first = home.exec("hello", cwd=project, env=home.env(env))
    assert first.returncode == 0, first.stderr
    ask(env, tmp_path)  # the first session has ended (SessionEnd signed its seat off)

    run = home.exec("a new session", cwd=project, env=home.env(env))

    assert run.returncode == 0, run.stderr
    assert run.thread_id != first.thread_id
    assert len(seats(env)) == 2
    told_once(stand_in)
    start = next(r for r in stand_in.model_requests if r.count(QUESTION))
    assert len(start.items) <= len(stand_in.model_requests[0].items)  # in its first request


@pytest.mark.parametrize(
    "stand_in",
    [[Text("ready"), *mcp_turns("inbox", {"room": "team"}), Text("done")]],
    indirect=True,
)
def test_the_inbox_tool_answers_as_the_sessions_own_seat(
    home: CodexHome, project: Path, env: dict[str, str], stand_in: StandIn, tmp_path: Path
):
    first = home.exec("start", cwd=project, env=home.env(env))
    ask(env, tmp_path)

    run = home.exec("read", cwd=project, env=home.env(env), resume=first.thread_id)

    assert run.returncode == 0, run.stderr
    [(_seat, client)] = seats(env)  # the hooks' seat and the MCP server's are one
    assert client == "codex"
    assert QUESTION in stand_in.model_requests[-1].last_output()


def test_the_codex_sessions_answer_with_re_wakes_the_asking_session(
    home: CodexHome, project: Path, env: dict[str, str], stand_in: StandIn, tmp_path: Path
):
    first = home.exec("hello", cwd=project, env=home.env(env))
    assert first.returncode == 0, first.stderr
    question = ask(env, tmp_path)
    answer = {"room": "team", "type": "ANSWER", "text": "8443.", "re": question["id"]}
    stand_in.use([*mcp_turns("send", answer), Text("answered")])

    run = home.exec("answer what you are asked", cwd=project, env=home.env(env))

    assert run.returncode == 0, run.stderr
    told_once(stand_in)
    answered_and_woke_the_asker(env, tmp_path, question)


@pytest.mark.parametrize(
    "stand_in",
    [[*mcp_turns("focus", FOCUS), *mcp_turns("claim", CLAIM), *mcp_turns("agents"),
          Text("done")]],
    indirect=True,
)  # fmt: skip
def test_the_focus_claim_and_agents_tools_act_as_the_sessions_own_seat(
    home: CodexHome, project: Path, env: dict[str, str], stand_in: StandIn
):
    run = home.exec("focus, claim, list", cwd=project, env=home.env(env))

    assert run.returncode == 0, run.stderr
    [(seat, _client)] = seats(env)
    listed = stand_in.model_requests[-1].last_output()
    focused_claimed_and_listed(env, seat, listed, "codex")


def test_the_search_tool_finds_the_rooms_entries(
    home: CodexHome, project: Path, env: dict[str, str], stand_in: StandIn, tmp_path: Path
):
    said = api(env, tmp_path, "send", "team", "FACT", QUESTION)  # no one is addressed
    assert said.returncode == 0, said.stderr
    stand_in.use([*mcp_turns("search", {"query": "staging"}), Text("found")])

    run = home.exec("look it up", cwd=project, env=home.env(env))

    assert run.returncode == 0, run.stderr
    assert QUESTION in stand_in.model_requests[-1].last_output()


def test_the_wait_tool_returns_the_question_asked_while_it_waits(
    home: CodexHome, project: Path, env: dict[str, str], stand_in: StandIn, tmp_path: Path
):
    wait = mcp_turns("wait", {"room": "team", "timeout": 60})
    model = asking_during([*wait, Text("got it")], lambda reply: reply is wait[-1], env,
                          tmp_path, Text("done."))  # fmt: skip
    stand_in.use(model)

    run = home.exec("wait for a question", cwd=project, env=home.env(env))

    assert run.returncode == 0, run.stderr
    [(seat, _client)] = seats(env)
    assert model.reports[0]["wakes"] == [seat]
    assert QUESTION in stand_in.model_requests[-1].last_output()  # the wait's result
    told_once(stand_in)


PATCH = (
    "*** Begin Patch\n*** Update File: src/app.py\n@@\n-PORT = 8080\n+PORT = 9090\n*** End Patch\n"
)


@pytest.mark.parametrize("stand_in", [[Patch(PATCH), Text("held back")]], indirect=True)
def test_a_patch_of_a_file_another_session_claims_is_held_back(
    home: CodexHome, project: Path, env: dict[str, str], stand_in: StandIn
):
    other = {**env, "AGENT_SALON_NAME": "web-app", "CLAUDE_CODE_SESSION_ID": API_SESSION,
             "AGENT_SALON_ROOM": "team"}  # fmt: skip
    done = run_salon("claim", "src/app.py", "--note", "moving the port", env=other, cwd=project)
    assert done.returncode == 0, done.stderr

    run = home.exec("change the port", cwd=project, env=home.env(env))

    assert run.returncode == 0, run.stderr
    assert (project / "src" / "app.py").read_text() == "PORT = 8080\n"
    said = stand_in.model_requests[-1].last_output()
    assert "src/app.py is claimed by another session" in said, said
    assert "moving the port" in said


def test_uninstall_leaves_git_status_as_it_was(home: CodexHome, project: Path, env: dict[str, str]):
    assert git(project, "status", "--porcelain") == ""  # the machine's files are excluded

    done = run_salon("uninstall", "--client", "codex", env=home.env(env), cwd=project)

    assert done.returncode == 0, done.stderr
    assert git(project, "status", "--porcelain", "--ignored") == ""
    assert not (project / ".codex").exists()
    user = home.config_path.read_text()
    assert "agent-salon" not in user and str(project) not in user
