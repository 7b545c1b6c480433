"""`salon install --client codex` on a temporary project and HOME, its hooks run as Codex
runs them (JSON on stdin), and the pure parts: Codex's trust hash, a patch's files, the
TOML edits. No Codex CLI needed (tests/test_codex_cli.py drives the real one)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from mcpgate.codex import config as codexconfig
from mcpgate.codex import tomledit
from mcpgate.codex.hookinput import edit_payloads, patch_paths
from tests.claude_kit import hook_json, ok, ok_json
from tests.support import run_salon

SESSION = "01a250af-d3b0-7870-84a5-ec39a7ada390"
OTHER = "c4e1b7d2-8a9f-4e3d-b2c1-a0f9e8d7c6b5"
THEIRS = 'model = "gpt-5.5"\n\n[mcp_servers.docs]\ncommand = "docs-mcp"\n'
USERS = '# mine\nmodel = "gpt-5.5"\n\n[projects."/elsewhere"]\ntrust_level = "trusted"\n'


@pytest.fixture
def env(env, tmp_path):
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text(USERS)
    data = str(home / ".local" / "share")
    return dict(env, HOME=str(home), CODEX_HOME=str(home / ".codex"), XDG_DATA_HOME=data)


@pytest.fixture
def proj(tmp_path):
    path = tmp_path / "web-app"
    (path / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "src" / "app.py").write_text("PORT = 8080\n")
    return path


def install(env, proj, *args):
    return run_salon("install", "--client", "codex", "team", *args, env=env, cwd=proj)


def user_config(env) -> str:
    return (Path(env["CODEX_HOME"]) / "config.toml").read_text()


# ---------------------------------------------------------------- pure parts


def test_the_trust_hash_is_the_one_codex_0_171_computes():
    # currentHash as `codex app-server` (hooks/list) reported it for these hooks.
    assert (
        codexconfig.hook_hash(
            "SessionStart",
            None,
            {"command": "salon hook session-start --client codex", "timeout": 30},
        )
        == "sha256:96785f7429a1dbc9e1dff0f4d6bdc7d04a4ba4e9ba752313bf7eb41939025d17"
    )
    assert (
        codexconfig.hook_hash(
            "PreToolUse",
            "^apply_patch$",
            {"command": "salon hook pre-edit --client codex", "timeout": 30},
        )
        == "sha256:68686d642d4ef1a3d6c3b19041eb113fce1cd5300ee121606d88b49cc80ca032"
    )
    assert (
        codexconfig.hook_hash(
            "SessionEnd", None, {"command": "salon hook session-end --client codex", "timeout": 3}
        )
        == "sha256:76bd00ab8251fa4fc8269e8568b3e5770d6e036f176a4c445565434f4e9429fe"
    )


def test_a_patch_names_each_file_it_adds_updates_deletes_or_moves_once():
    patch = (
        "*** Begin Patch\n*** Add File: a.py\n+x\n*** Update File: b.py\n*** Move to: c.py\n"
        "@@\n-y\n+z\n*** Delete File: d.py\n*** Update File: a.py\n*** End Patch\n"
    )
    assert patch_paths(patch) == ["a.py", "b.py", "c.py", "d.py"]
    payloads = edit_payloads({"tool_name": "apply_patch", "tool_input": {"command": patch}})
    assert [p["tool_input"]["file_path"] for p in payloads] == ["a.py", "b.py", "c.py", "d.py"]
    shell = {"tool_name": "Bash", "tool_input": {"command": "ls"}}
    assert edit_payloads(shell) == [shell]


def test_a_toml_table_of_ours_is_set_where_it_stands_and_removed_leaving_the_rest():
    first = tomledit.edit(THEIRS, "c", set_tables=[(("mcp_servers", "salon"), {"a": 1})])
    again = tomledit.edit(first, "c", set_tables=[(("mcp_servers", "salon"), {"a": 2})])

    assert first.startswith(THEIRS) and "[mcp_servers.salon]  # agent-salon\na = 1\n" in first
    assert again == first.replace("a = 1", "a = 2")
    assert tomledit.edit(again, "c", remove=[("mcp_servers", "salon")]) == THEIRS


def test_a_toml_file_that_defines_our_table_another_way_is_refused():
    inline = 'mcp_servers = { salon = { command = "x" } }\n'
    with pytest.raises(tomledit.TomlEditError, match="in a way salon does not edit"):
        tomledit.edit(inline, "c", set_tables=[(("mcp_servers", "salon"), {"command": "y"})])
    with pytest.raises(tomledit.TomlEditError, match="not valid TOML"):
        tomledit.edit("[broken\n", "c", remove=[("mcp_servers", "salon")])


# ---------------------------------------------------------------- install, uninstall


def test_install_writes_the_server_the_hooks_and_their_trust_and_a_rerun_changes_nothing(env, proj):
    (proj / ".codex").mkdir()
    (proj / ".codex" / "config.toml").write_text(THEIRS)

    done = ok(install(env, proj))

    config = (proj / ".codex" / "config.toml").read_text()
    assert config.startswith(THEIRS)
    server = tomledit.loads(config, "c")["mcp_servers"]["salon"]
    assert server["args"][-1] == "mcp" and server["required"] is True
    assert server["startup_timeout_sec"] == 30
    assert server["env"]["AGENT_SALON_NAME"] == "web-app"
    assert server["env"]["AGENT_SALON_CLIENT"] == "codex"
    assert "AGENT_SALON_SECRET" in server["env_vars"]
    hooks = json.loads((proj / ".codex" / "hooks.json").read_text())["hooks"]
    assert sorted(hooks) == sorted(event for event, _, _ in codexconfig.HOOK_EVENTS)
    assert hooks["PreToolUse"][0]["matcher"] == "^apply_patch$"
    assert hooks["Stop"][0]["hooks"][0]["command"].endswith("hook stop --client codex")
    user = user_config(env)
    assert user.startswith(USERS)
    data = tomledit.loads(user, "u")
    assert data["projects"][str(proj)] == {"trust_level": "trusted"}
    key = f"{proj}/.codex/hooks.json:stop:0:0"
    stop = hooks["Stop"][0]["hooks"][0]
    assert data["hooks"]["state"][key]["trusted_hash"] == codexconfig.hook_hash("Stop", None, stop)
    assert "/.codex/hooks.json" in (proj / ".git" / "info" / "exclude").read_text()
    assert ".git/info/exclude" in done.stdout

    again = ok(install(env, proj))
    assert again.stdout.count("unchanged") == 3, again.stdout
    assert user_config(env) == user


def test_uninstall_gives_every_file_its_own_bytes_back(env, proj):
    (proj / ".codex").mkdir()
    (proj / ".codex" / "config.toml").write_text(THEIRS)
    exclude = (proj / ".git" / "info" / "exclude").read_text()
    ok(install(env, proj))

    done = ok(run_salon("uninstall", "--client", "codex", env=env, cwd=proj))

    assert (proj / ".codex" / "config.toml").read_text() == THEIRS
    assert not (proj / ".codex" / "hooks.json").exists()
    assert user_config(env) == USERS
    assert (proj / ".git" / "info" / "exclude").read_text() == exclude
    assert "removed from .codex/hooks.json" in done.stdout
    nothing = ok(run_salon("uninstall", "--client", "codex", env=env, cwd=proj))
    assert "nothing of agent-salon's for Codex" in nothing.stdout


def test_a_project_marked_untrusted_for_codex_is_refused_and_nothing_is_written(env, proj):
    config = Path(env["CODEX_HOME"]) / "config.toml"
    config.write_text(USERS + f'\n[projects."{proj}"]\ntrust_level = "untrusted"\n')
    before = config.read_text()

    done = install(env, proj)

    assert done.returncode != 0
    assert "as 'untrusted' for Codex" in done.stderr and "Traceback" not in done.stderr
    assert config.read_text() == before
    assert not (proj / ".codex").exists()


def test_a_dry_run_writes_nothing(env, proj):
    done = ok(install(env, proj, "--dry-run"))

    assert "would be created" in done.stdout
    assert not (proj / ".codex").exists()
    assert user_config(env) == USERS


def test_flags_of_claude_code_are_refused_for_codex(env, proj):
    done = install(env, proj, "--plugin")
    assert done.returncode == 2 and "--plugin is for Claude Code" in done.stderr


# ---------------------------------------------------------------- the hooks, as Codex runs them


def codex_hook(env, kind, cwd, session=SESSION, **fields):
    payload = {"session_id": session, "cwd": str(cwd), "transcript_path": None, **fields}
    environment = dict(env, AGENT_SALON_NAME="web-app", AGENT_SALON_ROOM="team")
    return run_salon(
        "hook", kind, "--client", "codex", env=environment, cwd=cwd, stdin=json.dumps(payload)
    )


@pytest.fixture
def team(env, tmp_path):
    ok(run_salon("rooms", "--create", "team", env=env, cwd=tmp_path))


def ask(env, cwd) -> dict:
    environment = dict(env, AGENT_SALON_NAME="api", AGENT_SALON_ROOM="team",
                       CLAUDE_CODE_SESSION_ID=OTHER)  # fmt: skip
    return ok_json(run_salon("send", "team", "QUESTION", "Which port?", "--to", "web-app",
                             "--json", env=environment, cwd=cwd))  # fmt: skip


def test_a_claim_is_told_by_the_first_hook_that_can_and_by_no_other(env, proj, tmp_path, team):
    start = hook_json(codex_hook(env, "session-start", proj, source="startup"))
    assert "`inbox`" in start["hookSpecificOutput"]["additionalContext"]
    assert "salon inbox" not in start["hookSpecificOutput"]["additionalContext"]

    report = ask(env, tmp_path)
    assert report["toldAtNextTurn"] == [report["wakes"][0]]

    prompt = hook_json(codex_hook(env, "prompt-submit", proj, prompt="go on"))
    said = prompt["hookSpecificOutput"]
    assert said["hookEventName"] == "UserPromptSubmit"
    assert "Which port?" in said["additionalContext"]
    assert hook_json(codex_hook(env, "stop", proj, stop_hook_active=False)) is None
    assert hook_json(codex_hook(env, "prompt-submit", proj, prompt="again")) is None


def test_stop_holds_the_turn_once_per_entry(env, proj, tmp_path, team):
    hook_json(codex_hook(env, "session-start", proj, source="startup"))
    ask(env, tmp_path)

    held = hook_json(codex_hook(env, "stop", proj, stop_hook_active=False))

    assert held["decision"] == "block" and "Which port?" in held["reason"]
    assert "`inbox` tool" in held["reason"]
    assert hook_json(codex_hook(env, "stop", proj, stop_hook_active=True)) is None


def test_a_patch_touching_a_claimed_file_is_denied_naming_that_file(env, proj):
    other = dict(env, AGENT_SALON_NAME="web-app", CLAUDE_CODE_SESSION_ID=OTHER,
                 AGENT_SALON_ROOM="team")  # fmt: skip
    ok(run_salon("claim", "src/app.py", "--note", "porting", env=other, cwd=proj))
    hook_json(codex_hook(env, "session-start", proj, source="startup"))
    patch = (
        "*** Begin Patch\n*** Add File: src/new.py\n+x = 1\n*** Update File: src/app.py\n@@\n"
        "-PORT = 8080\n+PORT = 9090\n*** End Patch\n"
    )

    denied = hook_json(codex_hook(env, "pre-edit", proj, tool_name="apply_patch",
                                  tool_input={"command": patch}))  # fmt: skip

    out = denied["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny"
    assert "src/app.py is claimed by another session" in out["permissionDecisionReason"]
    assert "porting" in out["permissionDecisionReason"]
    free = "*** Begin Patch\n*** Add File: src/other.py\n+y = 2\n*** End Patch\n"
    assert hook_json(codex_hook(env, "pre-edit", proj, tool_name="apply_patch",
                                tool_input={"command": free})) is None  # fmt: skip


def test_agents_names_each_seats_client(env, proj, tmp_path):
    hook_json(codex_hook(env, "session-start", proj, source="startup"))

    listed = ok_json(run_salon("agents", "--json", env=env, cwd=tmp_path))

    [web] = [a for a in listed["agents"] if a["agent"] == "web-app"]
    [seat] = web["seats"]
    assert (seat["client"], seat["idleWake"]) == ("codex", False)
