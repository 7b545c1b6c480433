"""`salon install` on a temporary project (SPEC §8), and the merge rules it applies
(bus.claudeconfig, pure)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from bus import claudeconfig
from tests.claude_kit import hook_input, ok, ok_json, project, rooms_of, salon
from tests.support import run_salon

SETTINGS = Path(".claude/settings.json")
MCP = Path(".mcp.json")
SKILL = Path(".claude/skills/salon/SKILL.md")
THEIRS = {
    "model": "opus",
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh"}]}
        ],
    },
}


@pytest.fixture
def proj(tmp_path):
    """A project directory named like its agent, with settings of its own."""
    path = project(tmp_path, "web-app")
    (path / ".claude").mkdir()
    (path / SETTINGS).write_text(json.dumps(THEIRS, indent=4) + "\n")
    return path


def install(env, proj, *args):
    return run_salon("install", *args, env=env, cwd=proj)


def snapshot(proj: Path) -> dict[str, bytes]:
    """Every file under the project, by path: any write shows up as a difference."""
    return {
        str(p.relative_to(proj)): p.read_bytes() for p in sorted(proj.rglob("*")) if p.is_file()
    }


def settings(proj) -> dict:
    return json.loads((proj / SETTINGS).read_text())


def commands(data: dict) -> list[tuple[str, str]]:
    return [
        (event, hook.get("command") or f"mcp_tool {hook.get('tool')}")
        for event, groups in data["hooks"].items()
        for group in groups
        for hook in group["hooks"]
    ]


def ours(data: dict) -> list[tuple[str, str]]:
    return [(event, c) for event, c in commands(data) if "salon" in c or c == "mcp_tool checkin"]


def backups(proj) -> list[Path]:
    return sorted(proj.rglob("*.bak-*"))


# ---------------------------------------------------------------- on a project


def test_install_adds_the_hooks_and_keeps_every_other(env, proj):
    done = ok(install(env, proj, "team"))
    data = settings(proj)
    assert data["model"] == "opus"
    assert ("Stop", "notify-send done") in commands(data)
    assert ("PreToolUse", "./guard.sh") in commands(data)
    hooks = dict(ours(data))
    for event, kind in [("SessionStart", "session-start"), ("Stop", "stop"),
                        ("PostToolUse", "heartbeat")]:  # fmt: skip
        words = shlex.split(hooks[event])
        assert words[-5:] == [sys.executable, "-m", "salon.cli", "hook", kind]
        assigned = dict(w.split("=", 1) for w in words[:-5])
        assert assigned["AGENT_SALON_NAME"] == "web-app"
        assert assigned["AGENT_SALON_ROOM"] == "team"
        assert assigned["AGENT_SALON_DB"] == env["AGENT_SALON_DB"]
        if env.get("DATABASE_URL"):
            assert assigned["DATABASE_URL"] == env["DATABASE_URL"]
    assert "UserPromptSubmit" not in data["hooks"]
    assert ".claude/settings.json: updated (backup: .claude/settings.json.bak-" in done.stdout
    assert "claude --dangerously-load-development-channels server:agent-salon" in done.stdout


def test_install_adds_the_stdio_server_and_the_skill_and_creates_the_rooms(env, proj):
    ok(install(env, proj, "team,ops"))
    server = json.loads((proj / MCP).read_text())["mcpServers"]["agent-salon"]
    assert server["command"] == sys.executable
    assert server["args"] == ["-m", "salon.cli", "mcp"]
    assert server["env"]["AGENT_SALON_NAME"] == "web-app"
    assert server["env"]["AGENT_SALON_ROOM"] == "team,ops"
    skill = (proj / SKILL).read_text()
    assert skill.startswith("---\nname: salon\ndescription: ")
    assert f"{sys.executable} -m salon.cli send team QUESTION" in skill
    assert "AGENT_SALON_NAME=web-app" in skill
    rooms = {r["room"] for r in ok_json(salon(env, "rooms", "--json"))}
    assert {"team", "ops"} <= rooms


def test_a_rerun_changes_nothing(env, proj):
    ok(install(env, proj, "team"))
    before = snapshot(proj)
    done = ok(install(env, proj, "team"))
    assert snapshot(proj) == before
    assert done.stdout.count(": unchanged") == 3


def test_a_new_room_updates_our_hooks_instead_of_adding_a_second_copy(env, proj):
    ok(install(env, proj, "team"))
    ok(install(env, proj, "team,ops"))
    data = settings(proj)
    assert len(ours(data)) == 3
    assert all("AGENT_SALON_ROOM=team,ops" in command for _, command in ours(data))
    assert ("Stop", "notify-send done") in commands(data)
    server = json.loads((proj / MCP).read_text())["mcpServers"]["agent-salon"]
    assert server["env"]["AGENT_SALON_ROOM"] == "team,ops"


def test_replace_removes_our_old_entries_first_and_names_them(env, proj):
    ok(install(env, proj, "team", "--http", "http://127.0.0.1:9315"))
    done = ok(install(env, proj, "team", "--replace"))
    removed = [line for line in done.stdout.splitlines() if "removed from" in line]
    assert len(removed) == 5  # three hooks, the checkin hook, the old server entry
    assert any("UserPromptSubmit: mcp_tool agent-salon.checkin" in line for line in removed)
    assert any("Stop:" in line and "hook stop" in line for line in removed)
    assert any('mcpServers.agent-salon: {"type": "http"' in line for line in removed)
    data = settings(proj)
    assert "UserPromptSubmit" not in data["hooks"]
    assert len(ours(data)) == 3 and ("Stop", "notify-send done") in commands(data)


def test_dry_run_writes_nothing(env, proj):
    before = snapshot(proj)
    done = ok(install(env, proj, "brand-new-room", "--dry-run"))
    assert snapshot(proj) == before
    assert (
        "would be updated" in done.stdout and "room brand-new-room: would be created" in done.stdout
    )
    rooms = {r["room"] for r in ok_json(salon(env, "rooms", "--json"))}
    assert "brand-new-room" not in rooms


def test_dry_run_on_a_new_store_does_not_even_create_the_database_file(env, proj, tmp_path):
    store = tmp_path / "fresh" / "salon.db"
    environment = {k: v for k, v in env.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    done = ok(install(dict(environment, AGENT_SALON_DB=str(store)), proj, "team", "--dry-run"))
    assert not store.exists()
    assert "its migrations would be applied" in done.stdout


@pytest.mark.parametrize(
    "broken",
    ['{"hooks": {', "// a comment\n{}", '{"hooks": []}', '{"hooks": {"Stop": {"x": 1}}}'],
)
def test_an_invalid_settings_file_is_refused_untouched(env, proj, broken):
    (proj / SETTINGS).write_text(broken)
    before = snapshot(proj)
    done = install(env, proj, "team")
    assert done.returncode == 1
    assert len(done.stderr.strip().splitlines()) == 1
    assert "settings.json" in done.stderr and "untouched" in done.stderr
    assert snapshot(proj) == before


def test_an_invalid_mcp_file_is_refused_and_nothing_is_written(env, proj):
    (proj / MCP).write_text("{not json")
    before = snapshot(proj)
    done = install(env, proj, "team")
    assert done.returncode == 1 and ".mcp.json is not valid JSON" in done.stderr
    assert snapshot(proj) == before


def test_a_backup_exists_after_each_write(env, proj):
    original = (proj / SETTINGS).read_bytes()
    ok(install(env, proj, "team"))
    (first,) = [b for b in backups(proj) if b.name.startswith("settings.json")]
    assert first.read_bytes() == original
    installed = (proj / SETTINGS).read_bytes()
    ok(install(env, proj, "team,ops"))
    settings_backups = [b for b in backups(proj) if b.name.startswith("settings.json")]
    assert len(settings_backups) == 2
    assert installed in [b.read_bytes() for b in settings_backups]
    mcp_backups = [b for b in backups(proj) if b.name.startswith(".mcp.json")]
    assert len(mcp_backups) == 1  # created by the first run: nothing to back up then


def test_http_writes_the_http_server_and_the_checkin_hook(env, proj):
    ok(install(env, proj, "team,ops", "--http", "http://127.0.0.1:9315/"))
    server = json.loads((proj / MCP).read_text())["mcpServers"]["agent-salon"]
    assert server == {
        "type": "http",
        "url": "http://127.0.0.1:9315/mcp?label=web-app&room=team,ops",
    }
    (group,) = settings(proj)["hooks"]["UserPromptSubmit"]
    assert group["hooks"] == [
        {
            "type": "mcp_tool",
            "server": "agent-salon",
            "tool": "checkin",
            "input": {"session_id": "${session_id}", "cwd": "${cwd}"},
        }
    ]


def test_a_bad_http_url_is_a_usage_error_that_writes_nothing(env, proj):
    before = snapshot(proj)
    done = install(env, proj, "team", "--http", "127.0.0.1:9315")
    assert done.returncode == 2 and "http(s) URL" in done.stderr
    assert snapshot(proj) == before


def test_an_archived_room_is_refused_before_anything_is_written(env, proj):
    ok(salon(env, "rooms", "--create", "old"))
    ok(salon(env, "rooms", "--archive", "old"))
    before = snapshot(proj)
    done = install(env, proj, "team,old")
    assert done.returncode == 1 and "--restore old" in done.stderr
    assert snapshot(proj) == before


def test_the_installed_session_start_hook_runs_and_joins_the_rooms(env, proj):
    ok(install(env, proj, "team,ops"))
    (command,) = [c for e, c in ours(settings(proj)) if e == "SessionStart"]
    clean = {k: v for k, v in env.items() if not k.startswith(("AGENT_SALON_", "DATABASE_"))}
    done = subprocess.run(
        ["sh", "-c", command],
        env=dict(clean, AGENT_SALON_HEADLESS="0"),
        cwd=proj,
        input=hook_input("session-start", "5ee5a10n-0000-0000-0000-000000000000", proj),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    text = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "this session is web-app#5ee5a10n" in text
    assert rooms_of(env, "web-app#5ee5a10n") == ["ops", "team"]


def test_install_with_no_room_is_a_usage_error(env, proj):
    done = install(env, proj)
    assert done.returncode == 2


# ---------------------------------------------------------------- the merge rules


def wanted(http=False, rooms="team"):
    return claudeconfig.wanted_hooks(
        {kind: f"X={rooms} /py -m salon.cli hook {kind}" for kind in claudeconfig.KINDS},
        http=http,
    )


def test_merge_into_nothing_makes_three_hooks():
    merge = claudeconfig.merge_hooks({}, wanted())
    assert merge.changed and merge.removed == []
    assert list(merge.data["hooks"]) == ["SessionStart", "Stop", "PostToolUse"]
    assert merge.data["hooks"]["PostToolUse"][0]["matcher"] == "*"


def test_merge_is_idempotent_and_leaves_its_input_alone():
    first = claudeconfig.merge_hooks(THEIRS, wanted())
    assert THEIRS["hooks"]["Stop"] == [
        {"hooks": [{"type": "command", "command": "notify-send done"}]}
    ]
    again = claudeconfig.merge_hooks(first.data, wanted())
    assert not again.changed and again.data == first.data


def test_merge_updates_ours_where_it_is():
    data = {
        "hooks": {
            "Stop": [
                {
                    "hooks": [
                        {"type": "command", "command": "before"},
                        {"type": "command", "command": "salon hook stop"},  # by hand
                        {"type": "command", "command": "after"},
                    ]
                }
            ]
        }
    }
    merge = claudeconfig.merge_hooks(data, wanted(rooms="a,b"))
    stop = merge.data["hooks"]["Stop"]
    assert len(stop) == 1
    assert [h["command"] for h in stop[0]["hooks"]] == [
        "before",
        "X=a,b /py -m salon.cli hook stop",
        "after",
    ]


def test_merge_removes_a_second_copy_and_names_it():
    copy = {"type": "command", "command": "/old/python -m salon.cli hook heartbeat"}
    data = {"hooks": {"PostToolUse": [{"hooks": [copy]}, {"matcher": "Bash", "hooks": [copy]}]}}
    merge = claudeconfig.merge_hooks(data, wanted())
    assert len(merge.data["hooks"]["PostToolUse"]) == 1
    assert merge.removed == [f"PostToolUse: {copy['command']} (a second copy)"]


def test_replace_moves_ours_to_the_end_and_keeps_their_groups():
    data = claudeconfig.merge_hooks(THEIRS, wanted(http=True)).data
    merge = claudeconfig.merge_hooks(data, wanted(), replace=True)
    assert len(merge.removed) == 4
    assert merge.data["hooks"]["Stop"][0]["hooks"][0]["command"] == "notify-send done"
    assert "UserPromptSubmit" not in merge.data["hooks"]


def test_only_our_hooks_are_recognised_as_ours():
    assert claudeconfig.our_kind({"type": "command", "command": "/p -m salon.cli hook stop"})
    assert claudeconfig.our_kind({"type": "command", "command": "salon hook heartbeat"})
    assert claudeconfig.our_kind(claudeconfig.checkin_hook()) == "checkin"
    assert not claudeconfig.our_kind({"type": "command", "command": "echo salon"})
    assert not claudeconfig.our_kind({"type": "command", "command": "mysalon hook stop"})
    assert not claudeconfig.our_kind(
        {"type": "mcp_tool", "server": "other", "tool": "checkin", "input": {}}
    )


def test_shapes_claude_code_cannot_read_are_refused():
    for data in ([], {"hooks": []}, {"hooks": {"Stop": {}}}, {"hooks": {"Stop": [1]}}):
        with pytest.raises(claudeconfig.ShapeError):
            claudeconfig.merge_hooks(data, wanted())


def test_the_http_form_of_the_server():
    entry = claudeconfig.http_server("https://salon.example/base/mcp/", "web-app", ["a", "b"])
    assert entry == {"type": "http", "url": "https://salon.example/base/mcp?label=web-app&room=a,b"}
    for bad in ("127.0.0.1:9315", "ftp://x", "http://x/?a=1"):
        with pytest.raises(ValueError):
            claudeconfig.base_url(bad)


def test_merge_mcp_keeps_other_servers():
    data = {"mcpServers": {"github": {"type": "http", "url": "https://x"}}}
    merge = claudeconfig.merge_mcp(data, {"type": "http", "url": "u"})
    assert list(merge.data["mcpServers"]) == ["github", "agent-salon"]
    assert not claudeconfig.merge_mcp(merge.data, {"type": "http", "url": "u"}).changed
