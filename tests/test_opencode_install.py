"""`salon install --client opencode` on a temporary project and HOME, its hooks run the way
the plugin runs them (the commands written into the plugin file, Claude Code's hook JSON
on stdin), and the pure merge of opencode.json. No OpenCode needed
(tests/test_opencode_cli.py drives the real one)."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest

from mcpgate.claude.config import ShapeError
from mcpgate.opencode import config as opencodeconfig
from tests.claude_kit import hook_json, ok, ok_json
from tests.support import run_salon
from tests.test_codex_install import LINKED, tree

SESSION = "ses_dad2686eeffelQ2ECXLumiMEKt"
OTHER = "c4e1b7d2-8a9f-4e3d-b2c1-a0f9e8d7c6b5"
DOCS = {"type": "local", "command": ["docs-mcp"]}
THEIRS = {"theme": "x", "mcp": {"docs": DOCS}}
KINDS = ("session-start", "prompt-submit", "stop", "pre-edit", "session-end")
PATCH = (
    "*** Begin Patch\n*** Update File: src/app.py\n@@\n-PORT = 8080\n+PORT = 9090\n*** End Patch\n"
)


@pytest.fixture
def env(env, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    return dict(env, HOME=str(home), XDG_DATA_HOME=str(home / ".local" / "share"))


@pytest.fixture
def proj(tmp_path):
    path = tmp_path / "web-app"
    (path / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "src" / "app.py").write_text("PORT = 8080\n")
    return path


def install(env, proj, *args):
    return run_salon("install", "--client", "opencode", "team", *args, env=env, cwd=proj)


def uninstall(env, proj):
    return ok(run_salon("uninstall", "--client", "opencode", env=env, cwd=proj))


def plugin_file(env, proj) -> Path:
    """Where the plugin should be: $XDG_DATA_HOME/agent-salon/opencode/<project>-<hash>/."""
    here = proj.resolve()
    folder = f"{here.name}-{hashlib.sha256(str(here).encode()).hexdigest()[:8]}"
    return Path(env["XDG_DATA_HOME"]) / "agent-salon" / "opencode" / folder / "agent-salon.js"


def git(proj, *args) -> str:
    return subprocess.run(["git", *args], cwd=proj, check=True, capture_output=True,
                          text=True).stdout  # fmt: skip


def exclude(proj) -> Path:
    return proj / ".git" / "info" / "exclude"


# ---------------------------------------------------------------- pure parts


def test_merge_config_keeps_the_users_keys_servers_and_plugins_and_a_remerge_is_unchanged():
    theirs = {**THEIRS, "plugin": ["opencode-wakatime"]}
    server = opencodeconfig.server_entry(["salon", "mcp"], {"AGENT_SALON_NAME": "web-app"})
    url = "file:///data/opencode/web-app-1234abcd/agent-salon.js"

    merged = opencodeconfig.merge_config(theirs, server, url)

    assert merged.changed is True
    assert merged.data == {"theme": "x", "mcp": {"docs": DOCS, "salon": server},
                           "plugin": ["opencode-wakatime", url]}  # fmt: skip
    assert theirs == {**THEIRS, "plugin": ["opencode-wakatime"]}  # the input is not changed
    again = opencodeconfig.merge_config(merged.data, server, url)
    assert (again.changed, again.data) == (False, merged.data)
    moved = opencodeconfig.merge_config(merged.data, server, url.replace("1234abcd", "9999ffff"))
    assert moved.data["plugin"] == ["opencode-wakatime", url.replace("1234abcd", "9999ffff")]
    assert opencodeconfig.without_ours(merged.data).data == theirs
    plain = opencodeconfig.merge_config(THEIRS, server, url).data
    assert opencodeconfig.without_ours(plain).data == THEIRS
    assert opencodeconfig.without_ours({}).data == {}


@pytest.mark.parametrize(
    "data, message",
    [
        ({"mcp": {"salon": {"type": "local", "command": ["my-salon"]}}}, "is a server of your own"),
        ({"mcp": {"salon": {"type": "remote", "url": "http://x/mcp"}}}, "is a server of your own"),
        ({"mcp": [DOCS]}, '"mcp" is not an object'),
        ({"plugin": "opencode-wakatime"}, '"plugin" is not a list'),
    ],
)
def test_merge_config_refuses_a_foreign_salon_server_and_the_wrong_shapes(data, message):
    server = opencodeconfig.server_entry(["salon", "mcp"], {})
    with pytest.raises(ShapeError, match=re.escape(message)):
        opencodeconfig.merge_config(data, server, "file:///d/agent-salon.js")


# ---------------------------------------------------------------- install, uninstall


def test_install_writes_the_server_and_the_plugin_and_a_rerun_changes_no_byte(env, proj, tmp_path):
    status = git(proj, "status", "--porcelain")
    ok(install(env, proj))

    data = json.loads((proj / "opencode.json").read_text())
    server = data["mcp"]["salon"]
    assert (server["type"], server["enabled"]) == ("local", True)
    assert server["timeout"] == opencodeconfig.SERVER_TIMEOUT_MS
    assert isinstance(server["command"], list) and server["command"][-1] == "mcp"
    environment = server["environment"]
    assert (environment["AGENT_SALON_NAME"], environment["AGENT_SALON_ROOM"],
            environment["AGENT_SALON_CLIENT"]) == ("web-app", "team", "opencode")  # fmt: skip
    plugin = plugin_file(env, proj)
    assert data["plugin"] == [plugin.as_uri()]
    text = plugin.read_text()
    for kind in KINDS:
        assert f"hook {kind} --client opencode" in text
    assert "_salon_session" in text and "__COMMANDS__" not in text
    assert "/opencode.json" in exclude(proj).read_text().splitlines()
    assert git(proj, "status", "--porcelain") == status == "?? src/\n"
    before = tree(tmp_path)

    ok(install(env, proj))
    assert tree(tmp_path) == before


def test_the_plugin_file_is_made_private(env, proj):
    ok(install(env, proj))
    assert oct(plugin_file(env, proj).stat().st_mode & 0o777) == "0o600"


MINE = [json.dumps(THEIRS) + "\n", '{"plugin": []}\n', '{"theme": "x", "mcp": {}}\n']


@pytest.mark.parametrize("mine", MINE)
def test_uninstall_gives_the_users_opencode_json_its_own_bytes_back(env, proj, mine):
    mine = mine.encode()
    (proj / "opencode.json").write_bytes(mine)
    excluded = exclude(proj).read_bytes()
    ok(install(env, proj))
    assert json.loads((proj / "opencode.json").read_text())["mcp"]["salon"]

    uninstall(env, proj)

    assert (proj / "opencode.json").read_bytes() == mine
    assert exclude(proj).read_bytes() == excluded
    assert not plugin_file(env, proj).exists() and not plugin_file(env, proj).parent.exists()
    assert "nothing of agent-salon's for OpenCode" in uninstall(env, proj).stdout


def test_uninstall_leaves_no_opencode_json_where_there_was_none_and_git_as_before(env, proj):
    status = git(proj, "status", "--porcelain", "--ignored")
    excluded = exclude(proj).read_bytes()
    ok(install(env, proj))
    assert (proj / "opencode.json").is_file()

    uninstall(env, proj)

    assert not (proj / "opencode.json").exists()
    assert not plugin_file(env, proj).parent.exists()
    assert exclude(proj).read_bytes() == excluded
    assert git(proj, "status", "--porcelain", "--ignored") == status


# ---------------------------------------------------------------- refusals


def refused(env, proj, tmp_path, *args, code=1) -> str:
    """install fails, without a traceback, and changes nothing anywhere; its stderr."""
    before = tree(tmp_path)
    done = install(env, proj, *args)
    assert done.returncode == code and "Traceback" not in done.stderr, done.stderr
    assert tree(tmp_path) == before
    assert not plugin_file(env, proj).parent.exists()
    return done.stderr


NOT_OURS = {"mcp": {"salon": {"type": "local", "command": ["my-salon"]}}}


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "opencode.json is not valid JSON ("),
        ("[1, 2]", "opencode.json is not a JSON object"),
        ("null", "opencode.json is not a JSON object"),
        (json.dumps(NOT_OURS), '"mcp.salon" is a server of your own'),
        ('{"mcp": []}', '"mcp" is not an object'),
        ('{"plugin": "x"}', '"plugin" is not a list'),
    ],
)
def test_an_opencode_json_salon_cannot_merge_into_is_refused_and_nothing_written(
    env, proj, tmp_path, text, message
):
    (proj / "opencode.json").write_text(text)
    said = refused(env, proj, tmp_path)
    assert message in said and "nothing was changed" in said
    assert (proj / "opencode.json").read_text() == text


def test_uninstall_refuses_an_opencode_json_that_is_a_list_without_a_traceback(env, proj):
    (proj / "opencode.json").write_text("[1, 2]")
    done = run_salon("uninstall", "--client", "opencode", env=env, cwd=proj)
    assert done.returncode == 1 and "opencode.json is not a JSON object" in done.stderr
    assert (proj / "opencode.json").read_text() == "[1, 2]"


def test_a_planted_symlink_at_opencode_json_is_refused_and_its_target_untouched(
    env, proj, tmp_path
):
    target = tmp_path / "outside.json"
    target.write_text('{"theme": "x"}\n')
    (proj / "opencode.json").symlink_to(target)

    said = refused(env, proj, tmp_path)

    link = LINKED.format(link="opencode.json", to=target, label="opencode.json")
    assert said == f"salon install: {link}\n"
    assert target.read_text() == '{"theme": "x"}\n'


@pytest.mark.parametrize("flag", [["--http", "http://127.0.0.1:9315"], ["--plugin"], ["--triage"]])
def test_flags_of_claude_code_are_refused_for_opencode(env, proj, tmp_path, flag):
    said = refused(env, proj, tmp_path, *flag, code=2)
    assert f"{flag[0]} is for Claude Code: leave it out with --client opencode" in said


def test_a_dry_run_writes_nothing(env, proj, tmp_path):
    before = tree(tmp_path)
    done = ok(install(env, proj, "--dry-run"))
    assert "would be created" in done.stdout and "opencode.json" in done.stdout
    assert tree(tmp_path) == before and not (proj / "opencode.json").exists()


# ---------------------------------------------------------------- hooks, as the plugin runs them

EVENTS = {"session-start": "SessionStart", "prompt-submit": "UserPromptSubmit", "stop": "Stop",
          "pre-edit": "PreToolUse", "session-end": "SessionEnd"}  # fmt: skip


@pytest.fixture
def commands(env, proj, tmp_path) -> dict[str, str]:
    """The hook commands written into the plugin (the plugin runs them with /bin/sh -c)."""
    ok(run_salon("rooms", "--create", "team", env=env, cwd=tmp_path))
    ok(install(env, proj))
    found = re.search(
        r"^const COMMANDS = (\{.*?^\});$", plugin_file(env, proj).read_text(), re.M | re.S
    )
    return json.loads(found.group(1))


def plugin_hook(env, commands, kind, proj, event=None, **fields):
    payload = {"session_id": SESSION, "cwd": str(proj), "hook_event_name": event or EVENTS[kind],
               **fields}  # fmt: skip
    return subprocess.run(["/bin/sh", "-c", commands[kind]], env=env, cwd=proj, capture_output=True,
                          text=True, input=json.dumps(payload), timeout=60)  # fmt: skip


def ask(env, cwd) -> dict:
    environment = dict(env, AGENT_SALON_NAME="api", AGENT_SALON_ROOM="team",
                       CLAUDE_CODE_SESSION_ID=OTHER)  # fmt: skip
    return ok_json(run_salon("send", "team", "QUESTION", "Which port?", "--to", "web-app",
                             "--json", env=environment, cwd=cwd))  # fmt: skip


def test_session_start_names_the_seat_and_points_to_the_inbox_tool(env, proj, commands):
    start = hook_json(plugin_hook(env, commands, "session-start", proj, source="startup"))
    said = start["hookSpecificOutput"]["additionalContext"]
    assert f"web-app#{SESSION[:8]}" in said
    assert "`inbox`" in said and "salon inbox" not in said


@pytest.mark.parametrize("event, prompt", [("UserPromptSubmit", "go on"), ("PostToolUse", "")])
def test_a_question_is_told_by_the_first_hook_that_can_and_by_no_other(
    env, proj, tmp_path, commands, event, prompt
):
    hook_json(plugin_hook(env, commands, "session-start", proj, source="startup"))
    report = ask(env, tmp_path)
    assert report["toldAtNextTurn"] == [report["wakes"][0]]

    told = hook_json(plugin_hook(env, commands, "prompt-submit", proj, event, prompt=prompt))

    assert "Which port?" in told["hookSpecificOutput"]["additionalContext"]
    assert hook_json(plugin_hook(env, commands, "stop", proj, stop_hook_active=False)) is None
    assert hook_json(plugin_hook(env, commands, "prompt-submit", proj, prompt="again")) is None


def test_stop_blocks_once_with_the_question_and_never_a_turn_it_started(
    env, proj, tmp_path, commands
):
    hook_json(plugin_hook(env, commands, "session-start", proj, source="startup"))
    ask(env, tmp_path)

    assert hook_json(plugin_hook(env, commands, "stop", proj, stop_hook_active=True)) is None
    held = hook_json(plugin_hook(env, commands, "stop", proj, stop_hook_active=False))

    assert sorted(held) == ["decision", "reason"] and held["decision"] == "block"
    assert "Which port?" in held["reason"]
    assert hook_json(plugin_hook(env, commands, "stop", proj, stop_hook_active=False)) is None
    assert hook_json(plugin_hook(env, commands, "prompt-submit", proj, prompt="go on")) is None


@pytest.mark.parametrize(
    "tool, tool_input",
    [
        ("write", {"filePath": "{proj}/src/app.py", "content": "PORT = 9090\n"}),
        ("edit", {"filePath": "{proj}/src/app.py", "oldString": "8080", "newString": "9090"}),
        ("apply_patch", {"patchText": PATCH}),
    ],
)
def test_an_edit_of_a_file_another_session_claims_is_denied_naming_it(
    env, proj, commands, tool, tool_input
):
    other = dict(env, AGENT_SALON_NAME="web-app", CLAUDE_CODE_SESSION_ID=OTHER,
                 AGENT_SALON_ROOM="team")  # fmt: skip
    ok(run_salon("claim", "src/app.py", "--note", "porting", env=other, cwd=proj))
    hook_json(plugin_hook(env, commands, "session-start", proj, source="startup"))
    args = {k: v.replace("{proj}", str(proj)) for k, v in tool_input.items()}

    denied = hook_json(
        plugin_hook(env, commands, "pre-edit", proj, tool_name=tool, tool_input=args)
    )

    out = denied["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny"
    assert "src/app.py is claimed by another session" in out["permissionDecisionReason"]
    free = {k: v.replace("app.py", "other.py") for k, v in args.items()}
    assert hook_json(plugin_hook(env, commands, "pre-edit", proj, tool_name=tool,
                                 tool_input=free)) is None  # fmt: skip


def test_agents_names_the_opencode_seats_client(env, proj, tmp_path, commands):
    hook_json(plugin_hook(env, commands, "session-start", proj, source="startup"))

    listed = ok_json(run_salon("agents", "--json", env=env, cwd=tmp_path))

    [web] = [a for a in listed["agents"] if a["agent"] == "web-app"]
    [seat] = web["seats"]
    assert (seat["client"], seat["idleWake"]) == ("opencode", False)
