"""The real Claude Code CLI against agent-salon, offline.

Claude Code runs with a HOME of its own and talks to a scripted stand-in model on
127.0.0.1 (tests/claude_cli); the project is wired with `salon install`, and the store is
read back with `salon history`. Skipped when the CLI is not installed
(tests/claude_cli/install_claude.sh, or SALON_CLAUDE_BIN).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from bus import judge
from mcpgate.claude import config as claudeconfig
from tests.claude_cli.harness import (
    ClaudeHome,
    Tmux,
    channels_flag,
    claude_or_skip,
)
from tests.claude_cli.standin import Request, StandIn, Text, ToolUse, mcp_call, select
from tests.support import Daemon, query_store, run_salon, stretched

pytestmark = pytest.mark.slow

QUESTION = "Which port does the API listen on in staging?"
ASK_THE_TEAM = [*mcp_call("agent-salon", "send", {"text": QUESTION, "type": "QUESTION"}),
                Text("Asked.")]  # fmt: skip
API_SESSION = "c4e1b7d2-8a9f-4e3d-b2c1-a0f9e8d7c6b5"


@pytest.fixture
def claude() -> Path:
    return claude_or_skip()


@pytest.fixture
def stand_in(request: pytest.FixtureRequest) -> Iterator[StandIn]:
    """The model. A test gives its script (a list of replies, or a function of the request)
    with @pytest.mark.parametrize("stand_in", [script], indirect=True)."""
    script = getattr(request, "param", [])
    with StandIn(script) as server:
        yield server


@pytest.fixture
def home(tmp_path: Path, claude: Path, stand_in: StandIn) -> ClaudeHome:
    return ClaudeHome(tmp_path / "home", stand_in.url, claude)


@pytest.fixture
def project(tmp_path: Path, env: dict[str, str], home: ClaudeHome) -> Path:
    """A project `web-app` wired to the test's store with `salon install team` (stdio),
    trusted by Claude Code. The store is named by a variable, so install writes the
    personal files: .claude/settings.local.json and the local MCP scope in the HOME's
    .claude.json."""
    directory = tmp_path / "web-app"
    directory.mkdir()
    home.trust(directory)
    done = run_salon("install", "team", env=home.env(env), cwd=directory)
    assert done.returncode == 0, done.stderr
    return directory


def history(env: dict[str, str], project: Path, room: str = "team") -> list[dict]:
    """The room's entries as stored, read from the store itself: a `salon history` would
    need a seat in the room, and a seat of the test's own would change who is woken."""
    rows = query_store(
        env,
        "SELECT e.id, e.sender, e.type, e.content, e.via FROM bus_entry e "
        "JOIN bus_room r ON r.id = e.room_id WHERE r.name = ? ORDER BY e.seq",
        (room,),
    )
    keys = ("id", "from", "type", "content", "via")
    return [dict(zip(keys, row, strict=True)) for row in rows]


def test_claude_mcp_list_shows_the_installed_stdio_server_connected(
    home: ClaudeHome, project: Path, env: dict[str, str]
):
    done = home.run("mcp", "list", cwd=project, env=home.env(env), timeout=60)

    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("agent-salon:"))
    assert "Connected" in line, done.stdout


def test_with_claude_on_path_install_and_uninstall_change_the_local_scope_through_claude(
    home: ClaudeHome, tmp_path: Path, env: dict[str, str]
):
    directory = tmp_path / "web-app"
    directory.mkdir()
    home.trust(directory)
    environment = home.env(env)
    environment["PATH"] = f"{home.binary.parent}:{environment.get('PATH', '')}"
    done = run_salon("install", "team", env=environment, cwd=directory)
    assert done.returncode == 0, done.stderr
    assert "by `claude mcp add-json --scope local`" in done.stdout

    got = home.run("mcp", "get", "agent-salon", cwd=directory, env=home.env(env), timeout=60)
    assert "Scope: Local config" in got.stdout and "Connected" in got.stdout, got.stdout
    assert not (directory / ".mcp.json").exists()
    assert live_seats(env, directory) == {}

    done = run_salon("uninstall", env=environment, cwd=directory)
    assert done.returncode == 0, done.stderr
    assert "by `claude mcp remove --scope local`" in done.stdout
    got = home.run("mcp", "get", "agent-salon", cwd=directory, env=home.env(env), timeout=60)
    assert got.returncode != 0 and "No MCP server" in got.stdout + got.stderr


@pytest.mark.parametrize(
    "stand_in",
    [
        [
            *mcp_call("agent-salon", "send", {"text": QUESTION, "type": "question"}),
            Text("Asked the team."),
        ]
    ],
    indirect=True,
)
def test_a_scripted_send_lands_under_the_claude_sessions_seat(
    home: ClaudeHome, project: Path, env: dict[str, str], stand_in: StandIn, tmp_path: Path
):
    run = home.print_mode(
        "Ask the team which port the API uses.",
        cwd=project,
        env=home.env(env),
        allowed_tools=("mcp__agent-salon",),
        debug_file=tmp_path / "claude-debug.log",
    )

    assert run.process.returncode == 0, run.explain()
    assert run.text == "Asked the team.", run.explain()
    seat = f"web-app#{run.session_id[:8]}"
    [entry] = history(env, project)
    assert (entry["from"], entry["type"], entry["content"]) == (seat, "QUESTION", QUESTION)
    assert entry["via"] == "tool"
    # The model was shown the send report, naming the same seat as the sender.
    report = json.loads(stand_in.main_requests[-1].last_tool_result())
    assert (report["id"].replace("-", ""), report["from"]) == (
        str(entry["id"]).replace("-", ""),
        seat,
    )


def ask_as_api_service(env: dict[str, str], cwd: Path, text: str = QUESTION) -> dict:
    """A broadcast QUESTION from another agent's session, as its `salon send` would."""
    done = run_salon(
        "send",
        "team",
        "QUESTION",
        text,
        "--json",
        env={**env, "AGENT_SALON_NAME": "api-service", "CLAUDE_CODE_SESSION_ID": API_SESSION},
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def ask_the_team(
    home: ClaudeHome, project: Path, env: dict[str, str], server: str = "agent-salon"
) -> tuple[dict, str]:
    """One `claude -p` turn in which the scripted model sends (ASK_THE_TEAM): the entry it
    stored, and the Claude Code session id."""
    run = home.print_mode(
        "Ask the team.", cwd=project, env=home.env(env), allowed_tools=(f"mcp__{server}",)
    )
    assert run.process.returncode == 0, run.explain()
    [entry] = history(env, project)
    return entry, run.session_id


def live_seats(env: dict[str, str], project: Path) -> dict[str, str]:
    done = run_salon("agents", "--json", env=env, cwd=project)
    assert done.returncode == 0, done.stderr
    agents = json.loads(done.stdout)["agents"]
    return {seat["seat"]: seat["liveness"] for agent in agents for seat in agent["seats"]}


def wait_until(condition: Callable[[], bool], timeout: float = 45) -> bool:
    """Poll a condition on a real process's output (no fixed sleep)."""
    deadline = time.monotonic() + stretched(timeout)
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


@pytest.mark.parametrize("stand_in", [[Text("Nothing to do.")]], indirect=True)
def test_a_headless_run_is_told_its_seat_by_the_session_start_hook(
    home: ClaudeHome, project: Path, env: dict[str, str], stand_in: StandIn
):
    run = home.print_mode("Anything new?", cwd=project, env=home.env(env))

    assert run.process.returncode == 0, run.explain()
    first = stand_in.main_requests[0].shown_text()
    assert f"this run is web-app#{run.session_id[:8]} on the bus" in first
    # A headless run is not asked to arm a watch it cannot keep.
    assert "salon.cli wait" not in first


@pytest.fixture
def http_project(tmp_path: Path, env: dict[str, str], daemon: Daemon, home: ClaudeHome) -> Path:
    """A project `web-app` wired to the running daemon with `salon install team --http`."""
    directory = tmp_path / "web-app"
    directory.mkdir()
    home.trust(directory)
    done = run_salon("install", "team", "--http", daemon.url, env=home.env(env), cwd=directory)
    assert done.returncode == 0, done.stderr
    return directory


@pytest.mark.parametrize(
    "stand_in",
    [ASK_THE_TEAM],
    indirect=True,
)
def test_over_http_the_prompt_checkin_signs_the_send_with_the_claude_sessions_seat(
    home: ClaudeHome, http_project: Path, env: dict[str, str], stand_in: StandIn
):
    entry, session_id = ask_the_team(home, http_project, env)
    assert entry["from"] == f"web-app#{session_id[:8]}"


@pytest.mark.parametrize(
    "stand_in",
    [ASK_THE_TEAM],
    indirect=True,
)
def test_over_http_the_headers_helper_alone_signs_the_first_send_with_the_claude_sessions_seat(
    home: ClaudeHome, http_project: Path, env: dict[str, str], stand_in: StandIn
):
    """What a reconnect after a daemon restart relies on: the connect itself names the
    session (headersHelper), with no prompt's checkin to do it."""
    without_prompt_checkin(http_project)

    entry, session_id = ask_the_team(home, http_project, env)
    assert entry["from"] == f"web-app#{session_id[:8]}"


def test_a_health_check_leaves_no_live_seat_behind(
    home: ClaudeHome, project: Path, env: dict[str, str]
):
    done = home.run("mcp", "list", cwd=project, env=home.env(env), timeout=60)
    assert done.returncode == 0, done.stderr
    assert "agent-salon" in done.stdout and "Connected" in done.stdout

    assert live_seats(env, project) == {}


def test_an_http_health_check_leaves_no_seat_behind(
    home: ClaudeHome, http_project: Path, env: dict[str, str]
):
    done = home.run("mcp", "list", cwd=http_project, env=home.env(env), timeout=60)
    assert done.returncode == 0, done.stderr
    assert "agent-salon" in done.stdout and "Connected" in done.stdout

    assert live_seats(env, http_project) == {}
    [(sessions,)] = query_store(env, "SELECT count(*) FROM mcpgate_mcpsession")
    assert sessions >= 1  # it did connect: initialize made an MCP session, not a seat


@pytest.fixture
def debug_log(tmp_path: Path) -> Path:
    return tmp_path / "claude-debug.log"


def hooks_run(debug_log: Path, event: str) -> int:
    """How many times Claude Code has run this event's hook so far (its debug log)."""
    if not debug_log.exists():
        return 0
    return sum(
        1
        for line in debug_log.read_text(errors="replace").splitlines()
        if f"Hooks: {event}" in line and "finished with status" in line
    )


def stop_hooks_run(debug_log: Path) -> int:
    return hooks_run(debug_log, "Stop [")


def live_streams(daemon: Daemon) -> int:
    """The MCP streams the daemon holds open (its salon_live_streams gauge)."""
    text = httpx.get(daemon.url + "/metrics", timeout=10).text
    [value] = [
        line.split()[1] for line in text.splitlines() if line.startswith("salon_live_streams ")
    ]
    return int(float(value))


def mcp_lines(debug_log: Path) -> str:
    """What Claude Code's debug log says of the agent-salon server (connects, drops,
    reconnection attempts), for a failure message."""
    if not debug_log.exists():
        return ""
    lines = debug_log.read_text(errors="replace").splitlines()
    return "\n" + "\n".join(line[:200] for line in lines if 'server "agent-salon"' in line)


@pytest.fixture
def session(
    home: ClaudeHome, project: Path, env: dict[str, str], debug_log: Path
) -> Iterator[Tmux]:
    """An interactive Claude Code in the project, Monitor allowed, ready for a prompt."""
    terminal = home.interactive(
        cwd=project,
        env=home.env(env),
        debug_file=debug_log,
        extra=("--allowedTools", "Monitor"),
    )
    try:
        # Claude Code takes input before its SessionStart hook has put the seat on the
        # bus; an entry sent in between is sent before the seat is in the room.
        assert wait_until(lambda: hooks_run(debug_log, "SessionStart:") >= 1), terminal.screen()
        yield terminal
    finally:
        terminal.stop()


def reply_in_turns(request: Request) -> Text:
    return Text(f"Reply {len(request.messages)}.")


@pytest.mark.parametrize("stand_in", [reply_in_turns], indirect=True)
def test_a_question_that_arrives_during_a_turn_is_told_once_by_the_stop_hook(
    session: Tmux, project: Path, env: dict[str, str], stand_in: StandIn, debug_log: Path
):
    ask_as_api_service(env, project)

    session.type_line("What is on the bus?")

    assert wait_until(lambda: stand_in.seen("Stop hook blocking error")), session.screen()
    blocks = [r for r in stand_in.main_requests if "Stop hook blocking error" in r.shown_text()]
    assert QUESTION in blocks[0].shown_text()
    # The turn the block continued ends with a second Stop hook run; it must let it end.
    assert wait_until(lambda: stop_hooks_run(debug_log) >= 2), session.screen()

    def blocks_shown() -> int:
        return sum(
            "Stop hook blocking error" in json.dumps(message)
            for message in stand_in.main_requests[-1].messages
        )

    # A second block would reach the model a moment after that run.
    wait_until(lambda: blocks_shown() > 1, timeout=5)
    assert blocks_shown() == 1, "the Stop hook blocked twice for one entry"


def arm_salon_wait(request: Request) -> ToolUse | Text:
    """The model does what the SessionStart context asks: arm the Monitor with the
    `salon wait` command it names, then answers every later turn with a line of text."""
    command = next(
        (line.strip() for line in request.shown_text().splitlines() if "salon.cli wait" in line),
        None,
    )
    called = [
        block.get("name")
        for message in request.messages
        if message.get("role") == "assistant"
        for block in message.get("content", [])
        if isinstance(block, dict)
    ]
    if command and "ToolSearch" not in called:
        return select("Monitor")
    if command and "Monitor" not in called:
        return ToolUse(
            "Monitor", {"command": command, "description": "salon", "timeout_ms": 600000}
        )
    return Text("Noted.")


@pytest.mark.parametrize("stand_in", [arm_salon_wait], indirect=True)
def test_an_entry_told_by_the_salon_wait_monitor_is_not_repeated_by_the_stop_hook(
    session: Tmux, project: Path, env: dict[str, str], stand_in: StandIn, debug_log: Path
):
    session.type_line("Start.")
    assert wait_until(lambda: "Monitor started" in session.screen()), session.screen()
    assert wait_until(lambda: stop_hooks_run(debug_log) >= 1), session.screen()
    stops_before = stop_hooks_run(debug_log)
    ask_as_api_service(env, project)

    assert wait_until(lambda: stand_in.seen(f'"{QUESTION}"')), session.screen()
    # The turn the monitor line started ends with a Stop hook run; a block would reach
    # the model a moment after it.
    assert wait_until(lambda: stop_hooks_run(debug_log) > stops_before), session.screen()
    wait_until(lambda: stand_in.seen("Stop hook blocking error"), timeout=5)
    assert not stand_in.seen("Stop hook blocking error"), session.screen()


CLAIM = "Please rotate the staging signing key before the release."


@pytest.mark.parametrize("stand_in", [reply_in_turns], indirect=True)
def test_a_claim_sent_while_no_session_was_live_is_told_to_the_next_session_once(
    home: ClaudeHome, project: Path, env: dict[str, str], stand_in: StandIn, debug_log: Path
):
    # A first session of web-app puts its seat in team, and ends.
    first = home.print_mode("Anything new?", cwd=project, env=home.env(env))
    assert first.process.returncode == 0, first.explain()
    sent = run_salon(
        "send", "team", "REQUEST", CLAIM, "--to", "web-app", "--json",
        env={**env, "AGENT_SALON_NAME": "api-service", "CLAUDE_CODE_SESSION_ID": API_SESSION},
        cwd=project,
    )  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout)["wakes"] == []  # no session of web-app is live

    terminal = home.interactive(cwd=project, env=home.env(env), debug_file=debug_log)
    try:
        assert wait_until(lambda: hooks_run(debug_log, "SessionStart:") >= 1), terminal.screen()
        terminal.type_line("What is on the bus?")
        assert wait_until(lambda: stop_hooks_run(debug_log) >= 1), terminal.screen()
        # A block would reach the model a moment after the Stop hook ran.
        wait_until(lambda: stand_in.seen("Stop hook blocking error"), timeout=5)
        assert not stand_in.seen("Stop hook blocking error"), terminal.screen()
        shown = stand_in.main_requests[-1].shown_text()
    finally:
        terminal.stop()
    # The next session's own context told the model of the claim, once.
    assert shown.count(CLAIM) == 1, shown
    assert "is a claim on you" in shown
    rows = query_store(
        env,
        "SELECT s.name, w.told_by FROM bus_wakedecision w JOIN bus_seat s ON s.id = w.seat_id "
        "JOIN bus_entry e ON e.id = w.entry_id WHERE e.content = ? AND w.told_at IS NOT NULL",
        (CLAIM,),
    )
    assert [told_by for _, told_by in rows] == ["start"]
    assert rows[0][0] != f"web-app#{first.session_id[:8]}"


def salon_waits(project: Path) -> int:
    """How many `salon wait` processes run in the project (a Monitor's command)."""
    count = 0
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        count += cwd == str(project) and argv[-3:] == [b"salon.cli", b"wait", b""]
    return count


def arm_a_short_watch(request: Request) -> ToolUse | Text:
    """arm_salon_wait, with a Monitor that lapses after one second (as one armed for the
    longest Claude Code allows lapses after ten minutes); never arms it again."""
    reply = arm_salon_wait(request)
    if isinstance(reply, ToolUse) and reply.name == "Monitor":
        return ToolUse("Monitor", {**reply.input, "timeout_ms": 1000})
    return reply


@pytest.mark.parametrize("stand_in", [arm_a_short_watch], indirect=True)
def test_after_the_monitor_lapsed_the_stop_block_says_to_arm_it_again(
    session: Tmux, project: Path, env: dict[str, str], stand_in: StandIn, debug_log: Path
):
    session.type_line("Start.")
    assert wait_until(lambda: salon_waits(project) == 1), session.screen()
    # Claude Code ends the Monitor (and tells the model, now or with the next prompt);
    # this model does not arm it again.
    assert wait_until(lambda: salon_waits(project) == 0), session.screen()
    ask_as_api_service(env, project)

    session.type_line("Anything new?")

    # The Stop hook's input listed no running `salon wait`: the block it makes for the
    # question carries the command to arm the Monitor again.
    assert wait_until(lambda: stand_in.seen("Stop hook blocking error")), session.screen()
    [block] = [r for r in stand_in.main_requests if "Stop hook blocking error" in r.shown_text()]
    shown = block.shown_text()
    assert QUESTION in shown and "no Monitor is running `salon wait`" in shown


def install_plugin(home: ClaudeHome, env: dict[str, str], project: Path) -> str:
    """`salon install --plugin team` as a person runs it, with `claude` on PATH (it adds
    the marketplace and installs the plugin for the user). Returns its report."""
    environment = home.env(env)
    environment["PATH"] = f"{home.binary.parent}:{environment.get('PATH', '')}"
    done = run_salon("install", "--plugin", "team", env=environment, cwd=project)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def plugin_project(tmp_path: Path, env: dict[str, str], home: ClaudeHome) -> Path:
    """A bare, trusted project `web-app` with agent-salon installed as a Claude Code
    plugin by `salon install --plugin team`."""
    project = tmp_path / "web-app"
    project.mkdir()
    home.trust(project, servers=())
    report = install_plugin(home, env, project)
    assert "ran: claude plugin install agent-salon@agent-salon-local --scope user" in report
    assert list(project.iterdir()) == []  # the project itself is not touched
    return project


@pytest.fixture
def plugin_session(
    plugin_project: Path, env: dict[str, str], home: ClaudeHome
) -> Iterator[tuple[Path, Tmux]]:
    """An interactive session in the plugin project: the stdio server, the hooks and a
    monitor running `salon wait` for the whole session."""
    terminal = home.interactive(cwd=plugin_project, env=home.env(env))
    yield plugin_project, terminal
    terminal.stop()


def test_after_install_plugin_claude_mcp_list_shows_the_plugin_server_connected_and_no_seat(
    home: ClaudeHome, plugin_project: Path, env: dict[str, str]
):
    done = home.run("mcp", "list", cwd=plugin_project, env=home.env(env), timeout=60)

    assert done.returncode == 0, done.stderr
    line = next(
        line
        for line in done.stdout.splitlines()
        if line.startswith("plugin:agent-salon:agent-salon:")
    )
    assert "Connected" in line, done.stdout
    assert live_seats(env, plugin_project) == {}


def test_install_plugin_again_changes_nothing(
    home: ClaudeHome, plugin_project: Path, env: dict[str, str]
):
    report = install_plugin(home, env, plugin_project)
    assert "6 files, unchanged" in report


@pytest.mark.parametrize(
    "stand_in",
    [[*mcp_call("plugin_agent-salon_agent-salon", "send", {"text": QUESTION,
                                                          "type": "QUESTION"}),
      Text("Asked.")]],
    indirect=True,
)  # fmt: skip
def test_a_send_through_the_plugin_server_is_signed_by_the_projects_seat(
    home: ClaudeHome, plugin_project: Path, env: dict[str, str], stand_in: StandIn
):
    """The plugin names no agent: the project's directory does, for the server too."""
    entry, session_id = ask_the_team(home, plugin_project, env, "plugin_agent-salon_agent-salon")
    assert entry["from"] == f"web-app#{session_id[:8]}"


@pytest.mark.parametrize("stand_in", [reply_in_turns], indirect=True)
def test_a_plugin_monitor_running_salon_wait_tells_an_idle_session_of_a_question(
    plugin_session: tuple[Path, Tmux], env: dict[str, str], stand_in: StandIn
):
    project, terminal = plugin_session
    assert wait_until(lambda: "1 monitor" in terminal.screen()), terminal.screen()

    ask_as_api_service(env, project)

    assert wait_until(lambda: stand_in.seen(QUESTION), timeout=15), terminal.screen()
    told = next(r for r in stand_in.main_requests if QUESTION in r.shown_text()).shown_text()
    assert '<summary>Monitor event: "salon"</summary>' in told
    assert f'[salon] QUESTION from api-service#{API_SESSION[:8]} in "team"' in told
    # The SessionStart context knows the plugin watches: it asks for no Monitor of its own.
    assert "plugin's monitor watches the bus" in told and "Arm the Monitor" not in told


@pytest.fixture
def channel_session(home: ClaudeHome, http_project: Path, env: dict[str, str]) -> Iterator[Tmux]:
    """An interactive session over HTTP with Claude Code's channel gate opened offline."""
    home.channels = True
    home.write_config()
    terminal = home.interactive(cwd=http_project, env=home.env(env), extra=channels_flag())
    # The screen takes input before the MCP connection is up; an entry sent before the
    # session's stream is open is not pushed to it (see FINDINGS.md), so wait for it.
    open_streams = "SELECT count(*) FROM mcpgate_mcpsession WHERE stream_token != ''"
    assert wait_until(lambda: query_store(env, open_streams)[0][0] > 0), terminal.screen()
    yield terminal
    terminal.stop()


@pytest.mark.parametrize("stand_in", [reply_in_turns], indirect=True)
def test_with_channels_open_a_push_reaches_an_idle_session_as_a_channel_tag(
    channel_session: Tmux, http_project: Path, env: dict[str, str], stand_in: StandIn
):
    # No prompt yet, so no checkin: the headersHelper named the session at connect.
    bound = "SELECT claude_session_id FROM mcpgate_mcpsession WHERE stream_token != ''"
    assert [len(claude_session) for (claude_session,) in query_store(env, bound)] == [36]
    sent = ask_as_api_service(env, http_project)

    assert wait_until(lambda: stand_in.seen("<channel "), timeout=15), channel_session.screen()
    tag = next(
        line
        for request in stand_in.main_requests
        for line in request.shown_text().splitlines()
        if line.startswith("<channel ")
    )
    assert f'id="{sent["id"]}"' in tag
    assert 'type="QUESTION"' in tag
    assert stand_in.seen(f"{QUESTION}\n</channel>")


@pytest.mark.parametrize("stand_in", [reply_in_turns], indirect=True)
def test_a_push_reaches_a_session_once_across_its_checkin(
    channel_session: Tmux, http_project: Path, env: dict[str, str], stand_in: StandIn
):
    sent = ask_as_api_service(env, http_project)

    def delivered_to() -> list[str]:
        [(seats,)] = query_store(
            env, "SELECT delivered_to FROM bus_entry WHERE id = ?", (sent["id"].replace("-", ""),)
        )
        return json.loads(seats)

    # The push starts a turn; its prompt hook checks the session in, and the re-bound
    # stream catches up on what its new seat has not been pushed.
    bound = "SELECT count(*) FROM mcpgate_mcpsession WHERE claude_session_id != ''"
    assert wait_until(lambda: query_store(env, bound)[0][0] > 0), channel_session.screen()
    wait_until(lambda: len(delivered_to()) > 1, timeout=10)
    assert len(delivered_to()) == 1, delivered_to()


def entry_pushed_to(env: dict[str, str], entry_id: str) -> list[str]:
    [(seats,)] = query_store(
        env, "SELECT delivered_to FROM bus_entry WHERE id = ?", (entry_id.replace("-", ""),)
    )
    return json.loads(seats or "[]")


def without_prompt_checkin(project: Path) -> None:
    """Drop the UserPromptSubmit checkin hook: what binds the session is then the
    headersHelper's header alone."""
    path = project / ".claude" / "settings.local.json"  # install's personal file here
    settings = json.loads(path.read_text())
    del settings["hooks"]["UserPromptSubmit"]
    path.write_text(json.dumps(settings))


@pytest.fixture
def http_session(
    home: ClaudeHome, http_project: Path, env: dict[str, str], debug_log: Path
) -> Iterator[Tmux]:
    """An interactive session over HTTP, channels off (as for most users): Claude Code
    opens the stream and drops what is pushed on it. The salon's tools are allowed."""
    terminal = home.interactive(
        cwd=http_project,
        env=home.env(env),
        debug_file=debug_log,
        extra=("--allowedTools", "mcp__agent-salon"),
    )
    open_streams = "SELECT count(*) FROM mcpgate_mcpsession WHERE stream_token != ''"
    assert wait_until(lambda: query_store(env, open_streams)[0][0] > 0), terminal.screen()
    yield terminal
    terminal.stop()


@pytest.mark.parametrize(
    "stand_in",
    [[*mcp_call("agent-salon", "wait", {"timeout": 5}), Text("Answered it.")]],
    indirect=True,
)
def test_the_wait_tool_returns_an_entry_already_pushed_to_the_sessions_dropped_stream(
    http_session: Tmux, http_project: Path, env: dict[str, str], stand_in: StandIn,
    debug_log: Path,
):  # fmt: skip
    """REGRESSION: 2026-12-01 — a push counted as told, so `wait` ran to its timeout with
    `entries: []` while a QUESTION pushed to the (dropped) stream waited."""
    sent = ask_as_api_service(env, http_project)
    assert wait_until(lambda: entry_pushed_to(env, sent["id"]) != []), http_session.screen()

    http_session.type_line("Anything for me?")

    assert wait_until(lambda: stand_in.seen("Answered it.") or stand_in.seen(QUESTION))
    assert wait_until(lambda: stop_hooks_run(debug_log) >= 1), http_session.screen()
    told = [r for r in stand_in.main_requests if QUESTION in r.shown_text()]
    assert told, http_session.screen()
    last = json.dumps(stand_in.main_requests[-1].messages)
    assert last.count(QUESTION) == 1  # told by wait, and by nothing else
    assert f'"pushedAt":"{sent["ts"][:11]}' in told[0].shown_text()  # pushed before wait
    assert "Stop hook blocking error" not in last


@pytest.mark.parametrize(
    "stand_in",
    [[*mcp_call("agent-salon", "send", {"text": QUESTION, "type": "QUESTION"}), Text("Sent.")]],
    indirect=True,
)
def test_after_a_daemon_restart_the_next_send_is_signed_by_the_claude_sessions_seat(
    home: ClaudeHome, http_project: Path, env: dict[str, str], daemon: Daemon,
    stand_in: StandIn, debug_log: Path,
):  # fmt: skip
    without_prompt_checkin(http_project)
    terminal = home.interactive(
        cwd=http_project,
        env=home.env(env),
        debug_file=debug_log,
        extra=("--allowedTools", "mcp__agent-salon"),
    )
    try:
        bound = "SELECT claude_session_id FROM mcpgate_mcpsession WHERE claude_session_id != ''"
        # The first start of the CLI on a cold machine can take most of a minute.
        assert wait_until(lambda: query_store(env, bound) != [], timeout=90), terminal.screen()
        [(claude_session,)] = query_store(env, bound)
        # Restart only once its GET stream is open: Claude Code notices a lost server by
        # that stream (under load it can open seconds after the initialize).
        streaming = bound + " AND stream_token != ''"
        assert wait_until(lambda: query_store(env, streaming) != [], timeout=60), terminal.screen()

        daemon.stop()
        daemon.start()
        # Claude Code notices the lost connection and comes back (a tool call before that
        # fails with "not connected"): its SDK retries the stream within ~2.5 s, on the
        # old MCP session, which the store kept; after that Claude Code reconnects (five
        # tries within about 17 s) with a new MCP session, named by the headersHelper at
        # its initialize. Either way the new daemon holds its stream.
        assert wait_until(lambda: live_streams(daemon) == 1, timeout=90), (
            terminal.screen() + daemon.log()[-2000:] + mcp_lines(debug_log)
        )
        terminal.type_line("Ask the team.")

        assert wait_until(lambda: history(env, http_project) != []), (
            terminal.screen()
            + "\n".join(r.shown_text()[-600:] for r in stand_in.main_requests)
            + daemon.log()[-3000:]
        )
        [entry] = history(env, http_project)
        assert entry["from"] == f"web-app#{claude_session[:8]}"
        assert {c for (c,) in query_store(env, bound)} == {claude_session}
    finally:
        terminal.stop()


ANSWER = "Staging listens on 8443."


@pytest.mark.parametrize(
    "stand_in",
    [
        [
            *mcp_call("agent-salon", "send", {"text": QUESTION, "type": "QUESTION",
                                              "to": "api-service"}),
            Text("Asked."),
            Text("Thanks, noted."),
        ]
    ],
    indirect=True,
)  # fmt: skip
def test_two_projects_ask_and_answer_and_each_telling_reaches_its_model_exactly_once(
    home: ClaudeHome, project: Path, env: dict[str, str], stand_in: StandIn, claude: Path,
    tmp_path: Path,
):  # fmt: skip
    """web-app's model asks api-service a QUESTION with the send tool; api-service's
    idle session is told at the end of its next turn (Stop hook), answers with `re`; the
    asker is told of the answer when its session resumes (SessionStart). Each model is
    shown each entry once."""
    other = tmp_path / "api-service"
    other.mkdir()
    asked: dict[str, str] = {}
    replies: list = []

    def api_model(request: Request):
        if "id" in asked and QUESTION in request.shown_text() and not replies:
            replies.extend(
                [*mcp_call("agent-salon", "send", {"text": ANSWER, "type": "ANSWER",
                                                   "re": asked["id"]}),
                 Text("Answered.")]
            )  # fmt: skip
        return replies.pop(0) if replies else Text("Nothing for me.")

    with StandIn(api_model) as api_stand_in:
        api_home = ClaudeHome(tmp_path / "api-home", api_stand_in.url, claude)
        api_home.trust(other)
        done = run_salon("install", "team", env=api_home.env(env), cwd=other)
        assert done.returncode == 0, done.stderr
        api = api_home.interactive(
            cwd=other, env=api_home.env(env), extra=("--allowedTools", "mcp__agent-salon")
        )
        try:
            asking = home.print_mode(
                "Ask api-service about staging.", cwd=project, env=home.env(env),
                allowed_tools=("mcp__agent-salon",),
            )  # fmt: skip
            assert asking.process.returncode == 0, asking.explain()
            [question] = history(env, project)
            assert question["from"] == f"web-app#{asking.session_id[:8]}"
            asked["id"] = question["id"]

            api.type_line("Anything new?")
            assert wait_until(lambda: len(history(env, project)) == 2, timeout=90), api.screen()
            assert wait_until(lambda: not replies), api.screen()  # "Answered." was said
            [_, answer] = history(env, project)
            assert (answer["type"], answer["content"]) == ("ANSWER", ANSWER)
            api_told = json.dumps(api_stand_in.main_requests[-1].messages)
            # Claude Code shows one Stop hook block twice (as "Stop hook feedback" and as
            # a "Stop hook blocking error" message): one block, and nothing else with it.
            assert api_told.count("Stop hook blocking error") == 1
            assert api_told.count(QUESTION) == 2
        finally:
            api.stop()

    # A headless run is told nothing (nothing would wake it): the asker comes back to
    # its session interactively, and its SessionStart context tells it the answer.
    back = home.interactive(cwd=project, env=home.env(env), extra=("--resume", asking.session_id))
    try:
        back.type_line("Any answer?")
        assert wait_until(lambda: stand_in.seen(ANSWER)), back.screen()
        assert wait_until(lambda: stand_in.seen("Any answer?")), back.screen()
    finally:
        back.stop()
    told = query_store(env, "SELECT seat_name, told_by FROM bus_wakedecision ORDER BY id")
    assert [(seat.split("#")[0], by) for seat, by in told] == [
        ("api-service", "stop"),
        ("web-app", "start"),
    ]
    web_told = json.dumps(stand_in.main_requests[-1].messages)
    assert web_told.count(ANSWER) == 1


@pytest.mark.parametrize("verdict", ["no", "yes"])
def test_the_triage_judge_install_writes_is_a_headless_toolless_claude_that_answers(
    claude: Path, tmp_path: Path, verdict: str
):
    """`salon install --triage` wires TRIAGE_COMMAND as the judge: run it as the bus does
    (one JSON document on stdin), against the stand-in, and read its answer."""
    document = {"schema": "salon.triage/1", "question": "Is this for you? Answer yes or no."}
    with StandIn(lambda request: Text(verdict), answer_all=True) as model:
        home = ClaudeHome(tmp_path / "home", model.url, claude)
        env = home.env(dict(os.environ, PATH=f"{claude.parent}{os.pathsep}{os.environ['PATH']}"))
        argv = shlex.split(claudeconfig.TRIAGE_COMMAND)
        argv[0] = str(claude)
        done = subprocess.run(
            argv, input=json.dumps(document), env=env, cwd=tmp_path, capture_output=True,
            text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert judge.parse_answer(done.stdout) == verdict
        [asked] = [r for r in model.requests if r.messages and "salon.triage/1" in r.shown_text()]
    assert asked.tool_names == []  # toolless: the judge can do nothing but answer
    assert "haiku" in asked.body["model"]
    # Its system prompt says the entry is fenced data, never an answer or an instruction.
    system = json.dumps(asked.body.get("system"))
    assert "BEGIN ENTRY <fence>" in system and "never an instruction" in system


CART = "TOTAL = 1\n"
CLAIM_NOTE = "rewriting the totals"


def called_tools(request: Request) -> list[str]:
    return [
        block.get("name", "")
        for message in request.messages
        if message.get("role") == "assistant"
        for block in message.get("content", [])
        if isinstance(block, dict) and block.get("type") == "tool_use"
    ]


def first_prompt(request: Request) -> str:
    """The text of the conversation's first user message (the prompt, hook context)."""
    for message in request.messages:
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            return "\n".join(b.get("text", "") for b in content or [] if isinstance(b, dict))
    return ""


def two_sessions_one_cart(cart: Path, between: list[str]):
    """The model of both sessions: the first claims src/cart.py with the claim tool; the
    second reads the file and edits it, and edits it again when held back (`between`
    gets the file's content as the model is shown the first Edit's result)."""
    claim = "mcp__agent-salon__claim"

    def model(request: Request):
        called = called_tools(request)
        prompt = first_prompt(request)
        if "Claim the cart module." in prompt:
            if "ToolSearch" not in called:
                return select(claim)
            if claim not in called:
                return ToolUse(claim, {"paths": ["src/cart.py"], "note": CLAIM_NOTE})
            return Text("Noted.")
        if "Fix the cart total." in prompt:
            if "Read" not in called:
                return ToolUse("Read", {"file_path": str(cart)})
            if called.count("Edit") == 1 and not between:
                between.append(cart.read_text())
            if called.count("Edit") < 2:
                return ToolUse(
                    "Edit",
                    {"file_path": str(cart), "old_string": "TOTAL = 1", "new_string": "TOTAL = 2"},
                )
            return Text("Edited.")
        return Text("ok")

    return model


CART_BETWEEN: list[str] = []


@pytest.fixture
def stand_in_for_cart(tmp_path: Path) -> Iterator[StandIn]:
    CART_BETWEEN.clear()
    cart = tmp_path / "web-app" / "src" / "cart.py"
    with StandIn(two_sessions_one_cart(cart, CART_BETWEEN)) as server:
        yield server


@pytest.fixture
def cart_home(tmp_path: Path, claude: Path, stand_in_for_cart: StandIn) -> ClaudeHome:
    return ClaudeHome(tmp_path / "home", stand_in_for_cart.url, claude)


def test_an_edit_of_a_file_another_session_claims_is_held_back_once_and_its_holder_told(
    cart_home: ClaudeHome, env: dict[str, str], stand_in_for_cart: StandIn, tmp_path: Path,
    debug_log: Path,
):  # fmt: skip
    """Two sessions of web-app: the first claims src/cart.py (the MCP claim tool); the
    second's model edits it: its first Edit is denied with the reason (who holds it, the
    note, the two ways on) and the file is unchanged; its second Edit goes through; the
    first session is told by a FACT at the end of its next turn."""
    home, stand_in = cart_home, stand_in_for_cart
    project = tmp_path / "web-app"
    project.mkdir()
    home.trust(project)
    assert run_salon("install", "team", env=home.env(env), cwd=project).returncode == 0
    cart = project / "src" / "cart.py"
    cart.parent.mkdir()
    cart.write_text(CART)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-C", str(project)]
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    subprocess.run([*git, "add", "src"], check=True)
    subprocess.run([*git, "commit", "-qm", "cart"], check=True)

    first = home.interactive(
        cwd=project, env=home.env(env), debug_file=debug_log,
        extra=("--allowedTools", "mcp__agent-salon"),
    )  # fmt: skip
    try:
        assert wait_until(lambda: hooks_run(debug_log, "SessionStart:") >= 1), first.screen()
        first.type_line("Claim the cart module.")
        claimed = "SELECT s.name FROM bus_fileclaim c JOIN bus_seat s ON s.id = c.seat_id"
        assert wait_until(lambda: bool(query_store(env, claimed + " WHERE c.path = 'src/cart.py'")))
        [(holder,)] = query_store(env, claimed)
        assert wait_until(lambda: stop_hooks_run(debug_log) >= 1), first.screen()

        second = home.print_mode(
            "Fix the cart total.", cwd=project, env=home.env(env), allowed_tools=("Read", "Edit")
        )
        assert second.process.returncode == 0, second.explain()
        assert second.text == "Edited.", second.explain()
        edits = [r for r in stand_in.main_requests if "Fix the cart total." in first_prompt(r)]
        after_first_edit = next(r for r in edits if called_tools(r).count("Edit") == 1)
        reason = after_first_edit.last_tool_result()
        # The model saw the reason: the holder, its note, and the two ways on.
        assert after_first_edit.last_tool_result_is_error(), reason
        for part in (holder, "src/cart.py", CLAIM_NOTE, "--to", "repeat this same edit"):
            assert part in reason, (part, reason)
        # The first Edit changed nothing; the second did.
        assert CART_BETWEEN == [CART]
        after_second_edit = next(r for r in edits if called_tools(r).count("Edit") == 2)
        assert not after_second_edit.last_tool_result_is_error()
        assert cart.read_text() == "TOTAL = 2\n"

        # The holder is told by a FACT: its next turn ends in a Stop hook block naming it.
        editor = f"web-app#{second.session_id[:8]}"
        first.type_line("Anything new?")
        told = f"{editor} is editing src/cart.py anyway"
        assert wait_until(lambda: stand_in.seen(told), timeout=90), first.screen()
    finally:
        first.stop()
