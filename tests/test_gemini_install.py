"""`salon install --client gemini` on a temporary project and HOME, its hooks run as Gemini
CLI runs them (JSON on stdin), and the pure parts: the trust of a folder, the server's
entry, the settings merge. No Gemini CLI needed (tests/test_gemini_cli.py drives the
real one)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from mcpgate.claude.config import ShapeError
from mcpgate.gemini import config as geminiconfig
from tests.claude_kit import hook_json, ok, ok_json
from tests.support import run_salon

SESSION = "01a250af-d3b0-7870-84a5-ec39a7ada390"
OTHER = "c4e1b7d2-8a9f-4e3d-b2c1-a0f9e8d7c6b5"
LINT = {"hooks": [{"type": "command", "command": "my-lint"}]}
THEIRS = {"theme": "Dracula", "mcpServers": {"docs": {"command": "docs-mcp"}},
          "hooks": {"AfterAgent": [LINT]}}  # fmt: skip
USERS = {"/elsewhere": "TRUST_FOLDER"}


@pytest.fixture
def env(env, tmp_path):
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps(USERS, indent=2) + "\n")
    environment = dict(env, HOME=str(home), XDG_DATA_HOME=str(home / ".local" / "share"))
    environment.pop("GEMINI_CLI_TRUSTED_FOLDERS_PATH", None)
    return environment


@pytest.fixture
def proj(tmp_path):
    path = tmp_path / "web-app"
    (path / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "src" / "app.py").write_text("PORT = 8080\n")
    return path


def install(env, proj, *args):
    return run_salon("install", "--client", "gemini", "team", *args, env=env, cwd=proj)


def uninstall(env, proj):
    return ok(run_salon("uninstall", "--client", "gemini", env=env, cwd=proj))


def trust_file(env) -> Path:
    return Path(env["HOME"]) / ".gemini" / "trustedFolders.json"


def with_settings(proj, text: str) -> Path:
    (proj / ".gemini").mkdir(exist_ok=True)
    (proj / ".gemini" / "settings.json").write_text(text)
    return proj / ".gemini" / "settings.json"


# ---------------------------------------------------------------- pure parts


def test_trust_of_reads_own_entry_then_a_trusting_parent_then_nothing():
    root = Path("/w/proj")
    assert geminiconfig.trust_of({"/w/proj": "DO_NOT_TRUST", "/w": "TRUST_FOLDER"}, root) == (
        "DO_NOT_TRUST"
    )
    assert geminiconfig.trust_of({"/w": "TRUST_FOLDER"}, root) == "TRUST_FOLDER"
    assert geminiconfig.trust_of({"/w/sibling": "TRUST_PARENT"}, root) == "TRUST_FOLDER"
    assert geminiconfig.trust_of({"/w/sibling": "TRUST_FOLDER"}, root) is None
    assert geminiconfig.trust_of({"/w": "DO_NOT_TRUST"}, root) is None
    assert geminiconfig.trust_of({}, root) is None


def test_server_entry_puts_pythonpath_on_the_command_line_not_in_env():
    entry = geminiconfig.server_entry(
        ["/v/python", "-m", "salon.cli", "mcp"], {"PYTHONPATH": "/src", "AGENT_SALON_NAME": "a"}
    )
    assert entry["command"] == "env"
    assert entry["args"] == ["PYTHONPATH=/src", "/v/python", "-m", "salon.cli", "mcp"]
    assert entry["env"] == {"AGENT_SALON_NAME": "a"}
    assert (entry["trust"], entry["timeout"]) == (True, geminiconfig.SERVER_TIMEOUT_MS)
    assert geminiconfig.is_our_server(entry)
    plain = geminiconfig.server_entry(["salon", "mcp"], {"AGENT_SALON_NAME": "a"})
    assert (plain["command"], plain["args"]) == ("salon", ["mcp"])


def test_merge_settings_keeps_the_users_keys_and_refuses_a_salon_server_not_ours():
    commands = {kind: f"salon hook {kind} --client gemini" for kind in geminiconfig.KINDS}
    server = geminiconfig.server_entry(["salon", "mcp"], {})
    merged = geminiconfig.merge_settings(THEIRS, commands, server, replace=False).data
    assert merged["theme"] == "Dracula"
    assert merged["mcpServers"] == {"docs": {"command": "docs-mcp"}, "salon": server}
    commands_after = [h["command"] for g in merged["hooks"]["AfterAgent"] for h in g["hooks"]]
    assert commands_after == ["my-lint", "salon hook stop --client gemini"]
    assert geminiconfig.without_ours(merged).data == THEIRS
    mine = {"mcpServers": {"salon": {"command": "my-salon-server"}}}
    with pytest.raises(ShapeError, match="is a server of your own"):
        geminiconfig.merge_settings(mine, commands, server, replace=False)


# ---------------------------------------------------------------- install, uninstall


def test_install_writes_hooks_server_and_trust_and_a_rerun_changes_nothing(env, proj):
    settings = with_settings(proj, json.dumps(THEIRS, indent=2) + "\n")

    ok(install(env, proj))

    data = json.loads(settings.read_text())
    assert data["theme"] == "Dracula" and data["mcpServers"]["docs"] == {"command": "docs-mcp"}
    hooks = data["hooks"]
    assert sorted(hooks) == sorted(event for event, _, _ in geminiconfig.HOOK_EVENTS)
    assert hooks["BeforeTool"][0]["matcher"] == "^(write_file|replace)$"
    assert hooks["BeforeTool"][0]["hooks"][0]["command"].endswith("hook pre-edit --client gemini")
    assert hooks["SessionEnd"][0]["hooks"][0]["command"].endswith("session-end --client gemini")
    assert hooks["AfterAgent"][0]["hooks"][0]["command"] == "my-lint"
    server = data["mcpServers"]["salon"]
    assert server["trust"] is True and server["timeout"] == geminiconfig.SERVER_TIMEOUT_MS
    assert server["args"][-1] == "mcp" and "PYTHONPATH" not in server["env"]
    assert server["command"] == "env" and server["args"][0].startswith("PYTHONPATH=")
    assert server["env"]["AGENT_SALON_NAME"] == "web-app"
    assert server["env"]["AGENT_SALON_CLIENT"] == "gemini"
    assert json.loads(trust_file(env).read_text()) == {**USERS, str(proj): "TRUST_FOLDER"}
    assert "/.gemini/settings.json" in (proj / ".git" / "info" / "exclude").read_text()
    before = (settings.read_bytes(), trust_file(env).read_bytes())

    ok(install(env, proj))
    assert (settings.read_bytes(), trust_file(env).read_bytes()) == before


def test_uninstall_gives_every_file_its_own_bytes_back(env, proj):
    settings = with_settings(proj, json.dumps(THEIRS) + "\n")
    mine, users = settings.read_bytes(), trust_file(env).read_bytes()
    exclude = (proj / ".git" / "info" / "exclude").read_bytes()
    ok(install(env, proj))

    uninstall(env, proj)

    assert settings.read_bytes() == mine
    assert trust_file(env).read_bytes() == users
    assert (proj / ".git" / "info" / "exclude").read_bytes() == exclude
    assert "nothing of agent-salon's" in uninstall(env, proj).stdout


def test_uninstall_removes_what_install_created_and_leaves_a_parents_trust(env, proj):
    ok(install(env, proj))
    uninstall(env, proj)
    assert not (proj / ".gemini").exists()
    assert json.loads(trust_file(env).read_text()) == USERS

    trusted = json.dumps({str(proj.parent): "TRUST_FOLDER"})
    trust_file(env).write_text(trusted)
    ok(install(env, proj))
    assert trust_file(env).read_text() == trusted  # trusted already: nothing added
    uninstall(env, proj)
    assert trust_file(env).read_text() == trusted and not (proj / ".gemini").exists()


def test_a_project_marked_do_not_trust_is_refused_and_nothing_is_written(env, proj):
    trust_file(env).write_text(json.dumps({**USERS, str(proj): "DO_NOT_TRUST"}))
    before = trust_file(env).read_bytes()

    done = install(env, proj)

    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "as DO_NOT_TRUST for Gemini CLI" in done.stderr
    assert trust_file(env).read_bytes() == before
    assert not (proj / ".gemini").exists()


@pytest.mark.parametrize("text", ["{not json", "[1, 2]"])
def test_a_settings_file_that_is_not_a_json_object_is_refused(env, proj, text):
    settings = with_settings(proj, text)
    users = trust_file(env).read_bytes()

    done = install(env, proj)

    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert ".gemini/settings.json" in done.stderr and "nothing was changed" in done.stderr
    assert settings.read_text() == text and trust_file(env).read_bytes() == users


def test_a_planted_symlink_at_the_settings_file_is_refused(env, proj, tmp_path):
    target = tmp_path / "outside.json"
    target.write_text("{}\n")
    (proj / ".gemini").mkdir()
    (proj / ".gemini" / "settings.json").symlink_to(target)

    done = install(env, proj)

    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "is a symbolic link" in done.stderr and "does not write through links" in done.stderr
    assert target.read_text() == "{}\n"
    assert json.loads(trust_file(env).read_text()) == USERS


def test_a_dry_run_writes_nothing(env, proj):
    users = trust_file(env).read_bytes()
    done = ok(install(env, proj, "--dry-run"))

    assert "would be created" in done.stdout
    assert not (proj / ".gemini").exists() and trust_file(env).read_bytes() == users


@pytest.mark.parametrize("flag", [["--http", "http://127.0.0.1:9315"], ["--plugin"], ["--triage"]])
def test_flags_of_claude_code_are_refused_for_gemini(env, proj, flag):
    done = install(env, proj, *flag)
    assert done.returncode == 2, done.stderr
    assert f"{flag[0]} is for Claude Code" in done.stderr and "--client gemini" in done.stderr
    assert not (proj / ".gemini").exists()


# ---------------------------------------------------------------- the hooks, as Gemini runs them

EVENTS = {kind: event for event, kind, _ in geminiconfig.HOOK_EVENTS}


def gemini_hook(env, kind, cwd, session=SESSION, **fields):
    payload = {"session_id": session, "cwd": str(cwd), "hook_event_name": EVENTS[kind],
               "transcript_path": None, **fields}  # fmt: skip
    environment = dict(env, AGENT_SALON_NAME="web-app", AGENT_SALON_ROOM="team")
    return run_salon(
        "hook", kind, "--client", "gemini", env=environment, cwd=cwd, stdin=json.dumps(payload)
    )


@pytest.fixture
def team(env, tmp_path):
    ok(run_salon("rooms", "--create", "team", env=env, cwd=tmp_path))


def ask(env, cwd) -> dict:
    environment = dict(env, AGENT_SALON_NAME="api", AGENT_SALON_ROOM="team",
                       CLAUDE_CODE_SESSION_ID=OTHER)  # fmt: skip
    return ok_json(run_salon("send", "team", "QUESTION", "Which port?", "--to", "web-app",
                             "--json", env=environment, cwd=cwd))  # fmt: skip


def test_session_start_names_the_seat(env, proj, team):
    start = hook_json(gemini_hook(env, "session-start", proj, source="startup"))
    said = start["hookSpecificOutput"]["additionalContext"]
    assert f"this session is web-app#{SESSION[:8]} on the bus" in said
    assert "`inbox`" in said and "salon inbox" not in said


def test_a_claim_is_told_by_the_first_hook_that_can_and_by_no_other(env, proj, tmp_path, team):
    hook_json(gemini_hook(env, "session-start", proj, source="startup"))
    report = ask(env, tmp_path)
    assert report["toldAtNextTurn"] == [report["wakes"][0]]

    prompt = hook_json(gemini_hook(env, "prompt-submit", proj, prompt="go on"))
    assert prompt["hookSpecificOutput"]["hookEventName"] == "BeforeAgent"
    assert "Which port?" in prompt["hookSpecificOutput"]["additionalContext"]
    assert hook_json(gemini_hook(env, "stop", proj, stop_hook_active=False)) is None
    assert hook_json(gemini_hook(env, "prompt-submit", proj, prompt="again")) is None
    again = hook_json(gemini_hook(env, "session-start", proj, source="resume"))
    assert "Which port?" not in again["hookSpecificOutput"]["additionalContext"]


def test_a_claim_from_before_a_resume_is_told_by_session_start_only(env, proj, tmp_path, team):
    hook_json(gemini_hook(env, "session-start", proj, source="startup"))
    ask(env, tmp_path)

    start = hook_json(gemini_hook(env, "session-start", proj, source="resume"))

    assert "Which port?" in start["hookSpecificOutput"]["additionalContext"]
    assert hook_json(gemini_hook(env, "prompt-submit", proj, prompt="go on")) is None
    assert hook_json(gemini_hook(env, "stop", proj, stop_hook_active=False)) is None


def test_stop_denies_once_per_entry_and_never_a_turn_it_started(env, proj, tmp_path, team):
    hook_json(gemini_hook(env, "session-start", proj, source="startup"))
    ask(env, tmp_path)

    assert hook_json(gemini_hook(env, "stop", proj, stop_hook_active=True)) is None
    held = hook_json(gemini_hook(env, "stop", proj, stop_hook_active=False))

    assert held["decision"] == "deny" and "Which port?" in held["reason"]
    assert hook_json(gemini_hook(env, "stop", proj, stop_hook_active=False)) is None


def test_a_write_to_a_claimed_file_is_denied_naming_that_file(env, proj):
    other = dict(env, AGENT_SALON_NAME="web-app", CLAUDE_CODE_SESSION_ID=OTHER,
                 AGENT_SALON_ROOM="team")  # fmt: skip
    ok(run_salon("claim", "src/app.py", "--note", "porting", env=other, cwd=proj))
    hook_json(gemini_hook(env, "session-start", proj, source="startup"))

    denied = hook_json(gemini_hook(env, "pre-edit", proj, tool_name="write_file",
                                   tool_input={"file_path": str(proj / "src" / "app.py"),
                                               "content": "PORT = 9090\n"}))  # fmt: skip

    assert denied["decision"] == "deny"
    assert "src/app.py is claimed by another session" in denied["reason"]
    assert "porting" in denied["reason"]
    free = {"file_path": str(proj / "src" / "other.py"), "old_string": "a", "new_string": "b"}
    assert hook_json(gemini_hook(env, "pre-edit", proj, tool_name="replace",
                                 tool_input=free)) is None  # fmt: skip


def test_agents_names_the_gemini_seats_client(env, proj, tmp_path):
    hook_json(gemini_hook(env, "session-start", proj, source="startup"))

    listed = ok_json(run_salon("agents", "--json", env=env, cwd=tmp_path))

    [web] = [a for a in listed["agents"] if a["agent"] == "web-app"]
    [seat] = web["seats"]
    assert (seat["client"], seat["idleWake"]) == ("gemini", False)
