"""The real Codex CLI against agent-salon, offline.

Codex runs `codex exec` with a HOME and CODEX_HOME of its own and talks to a scripted
Responses API stand-in on 127.0.0.1 (tests/codex_cli); the project is wired with `salon
install --client codex`, and the store is read back directly. Another project's session
(`api`, a plain `salon` command line with a session id) asks. Skipped when the CLI is
not installed (tests/codex_cli/install_codex.sh, or SALON_CODEX_BIN).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.codex_cli.harness import CodexHome, codex_or_skip
from tests.codex_cli.standin import Patch, Request, StandIn, Text, mcp_turns
from tests.support import query_store, run_salon

pytestmark = pytest.mark.slow

QUESTION = "Which port does the staging API listen on?"
API_SESSION = "c4e1b7d2-8a9f-4e3d-b2c1-a0f9e8d7c6b5"


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


def git(directory: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(directory), *args], capture_output=True, text=True, check=True
    )
    return done.stdout


def new_repo(directory: Path) -> Path:
    directory.mkdir(parents=True)
    git(directory, "init", "-q")
    git(directory, "config", "user.email", "t@example.invalid")
    git(directory, "config", "user.name", "t")
    (directory / "src").mkdir()
    (directory / "src" / "app.py").write_text("PORT = 8080\n")
    git(directory, "add", "-A")
    git(directory, "commit", "-q", "-m", "start")
    return directory


@pytest.fixture
def project(tmp_path: Path, env: dict[str, str], home: CodexHome) -> Path:
    """`web-app`, a git repository wired for Codex with `salon install --client codex
    team`; the store is named by a variable, so the commands name this machine's paths."""
    directory = new_repo(tmp_path / "web-app")
    done = run_salon("install", "--client", "codex", "team", env=home.env(env), cwd=directory)
    assert done.returncode == 0, done.stderr
    return directory


def api(env: dict[str, str], tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """A command of the other project's session (agent `api`, in the room `team`)."""
    where = tmp_path / "api"
    where.mkdir(exist_ok=True)
    environment = {**env, "AGENT_SALON_NAME": "api", "AGENT_SALON_ROOM": "team",
                   "CLAUDE_CODE_SESSION_ID": API_SESSION}  # fmt: skip
    return run_salon(*args, env=environment, cwd=where)


def ask(env: dict[str, str], tmp_path: Path) -> dict:
    done = api(env, tmp_path, "send", "team", "QUESTION", QUESTION, "--to", "web-app", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def seats(env: dict[str, str], agent: str = "web-app") -> list[tuple[str, str]]:
    return query_store(
        env,
        "SELECT s.name, s.client FROM bus_seat s JOIN bus_agent a ON a.id = s.agent_id "
        "WHERE a.name = ? ORDER BY s.name",
        (agent,),
    )


def told_once(stand_in: StandIn) -> None:
    """The question reached the model, and in one item of its conversation only: no
    request shows it twice, and none after the first lacks it (the history holds it)."""
    shown = [r.count(QUESTION) for r in stand_in.model_requests]
    assert max(shown) == 1, shown
    first = shown.index(1)
    assert all(n == 1 for n in shown[first:]), shown


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
    [[entry_id, sender]] = query_store(
        env,
        "SELECT id, sender_agent FROM bus_entry WHERE re = ?",
        (question["id"].replace("-", ""),),  # a UUID is stored as 32 hex digits
    )
    assert sender == "web-app"
    woken = query_store(
        env,
        "SELECT s.name FROM bus_wakedecision w JOIN bus_seat s ON s.id = w.seat_id "
        "WHERE w.entry_id = ? AND w.woken",
        (entry_id,),
    )
    assert [name for (name,) in woken] == [f"api#{API_SESSION[:8]}"], woken
    read = api(env, tmp_path, "inbox", "team", "--json")
    assert read.returncode == 0, read.stderr
    [got] = [e for e in json.loads(read.stdout)["entries"] if e["type"] == "ANSWER"]
    assert (got["content"], got["re"]) == ("8443.", question["id"])


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
