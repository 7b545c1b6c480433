"""`salon install` on a temporary project, and the merge rules it applies
(mcpgate.claude.config, pure)."""

from __future__ import annotations

import json
import os
import re
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from mcpgate.claude import config as claudeconfig
from tests.claude_kit import hook_input, ok, ok_json, project, rooms_of, salon
from tests.support import Daemon, make_staff, run_salon

SETTINGS = Path(".claude/settings.json")
LOCAL = Path(".claude/settings.local.json")
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
def env(env, tmp_path):
    """The store's environment with a HOME of the test's own (the local MCP scope lives
    in ~/.claude.json, the backups in its data directory), and no `claude` on PATH unless
    a test puts one there."""
    home = tmp_path / "home"
    home.mkdir()
    environment = {k: v for k, v in env.items() if k != "CLAUDE_CONFIG_DIR"}
    path = os.pathsep.join(
        d for d in env.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "claude").exists()
    )
    data = str(home / ".local" / "share")
    return dict(environment, HOME=str(home), XDG_DATA_HOME=data, PATH=path)


@pytest.fixture
def proj(tmp_path):
    """A project directory named like its agent, with personal settings of its own (the
    test's store is named by a variable, so install writes the personal files)."""
    path = project(tmp_path, "web-app")
    (path / ".claude").mkdir()
    (path / LOCAL).write_text(json.dumps(THEIRS, indent=4) + "\n")
    return path


def install(env, proj, *args):
    return run_salon("install", *args, env=env, cwd=proj)


def snapshot(proj: Path) -> dict[str, bytes]:
    """Every file under the project, and the HOME beside it, by path: any write shows up
    as a difference."""
    return {
        str(p): p.read_bytes()
        for root in (proj, proj.parent / "home")
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def settings(proj, path=LOCAL) -> dict:
    return json.loads((proj / path).read_text())


def user_config(proj) -> dict:
    return json.loads((proj.parent / "home" / ".claude.json").read_text())


def local_server(proj) -> dict:
    """The server in Claude Code's local MCP scope of the project."""
    return user_config(proj)["projects"][str(proj.resolve())]["mcpServers"]["agent-salon"]


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
    """The backups of the project's files, kept in the data directory of the HOME beside it."""
    return sorted((proj.parent / "home" / ".local" / "share" / "agent-salon").rglob("*.bak"))


BACKUPS = "~/.local/share/agent-salon/backups/web-app-"


# ---------------------------------------------------------------- on a project


def test_install_adds_the_hooks_to_the_personal_settings_and_keeps_every_other(env, proj):
    done = ok(install(env, proj, "team"))
    data = settings(proj)
    assert data["model"] == "opus"
    assert ("Stop", "notify-send done") in commands(data)
    assert ("PreToolUse", "./guard.sh") in commands(data)
    hooks = dict(ours(data))
    for event, kind in [("SessionStart", "session-start"), ("Stop", "stop"),
                        ("PostToolUse", "heartbeat"), ("PreToolUse", "pre-edit")]:  # fmt: skip
        words = shlex.split(hooks[event])
        assert words[-5:] == [sys.executable, "-m", "salon.cli", "hook", kind]
        assigned = dict(w.split("=", 1) for w in words[:-5])
        assert assigned["AGENT_SALON_NAME"] == "web-app"
        assert assigned["AGENT_SALON_ROOM"] == "team"
        assert assigned["AGENT_SALON_DB"] == env["AGENT_SALON_DB"]
        if env.get("DATABASE_URL"):
            assert assigned["DATABASE_URL"] == env["DATABASE_URL"]
    assert "UserPromptSubmit" not in data["hooks"]
    assert not (proj / SETTINGS).exists()
    assert f".claude/settings.local.json: updated (backup: {BACKUPS}" in done.stdout
    assert "/.claude/settings.local.json.bak)" in done.stdout and not list(proj.rglob("*.bak"))
    assert "claude --dangerously-load-development-channels server:agent-salon" in done.stdout


def test_install_adds_the_stdio_server_to_the_local_scope_and_the_skill_and_creates_the_rooms(
    env, proj
):
    ok(install(env, proj, "team,ops"))
    assert not (proj / MCP).exists()
    server = local_server(proj)
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
    assert len(ours(data)) == 5
    assert all("AGENT_SALON_ROOM=team,ops" in command for _, command in ours(data))
    assert ("Stop", "notify-send done") in commands(data)
    server = local_server(proj)
    assert server["env"]["AGENT_SALON_ROOM"] == "team,ops"


def test_replace_removes_our_old_entries_first_and_names_them(env, proj, daemon):
    ok(install(env, proj, "team", "--http", daemon.url))
    done = ok(install(env, proj, "team", "--replace"))
    removed = [line for line in done.stdout.splitlines() if "removed from" in line]
    assert len(removed) == 7  # five hooks, the checkin hook, the old server entry
    assert any("UserPromptSubmit: mcp_tool agent-salon.checkin" in line for line in removed)
    assert any("Stop:" in line and "hook stop" in line for line in removed)
    assert any('mcpServers.agent-salon: {"type": "http"' in line for line in removed)
    data = settings(proj)
    assert "UserPromptSubmit" not in data["hooks"]
    assert len(ours(data)) == 5 and ("Stop", "notify-send done") in commands(data)


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
    store.parent.mkdir()
    environment = {k: v for k, v in env.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    done = ok(install(dict(environment, AGENT_SALON_DB=str(store)), proj, "team", "--dry-run"))
    assert not store.exists()
    assert "its migrations would be applied" in done.stdout


def test_install_on_a_new_store_makes_every_apps_tables_so_a_login_can_be_made(env, proj, tmp_path):
    """install migrates a new store itself: every app's tables, the admin's and auth's too,
    not only the bus's (a store migrated with the commands' lean app set could never
    have a login: "no such table: auth_user")."""
    store = tmp_path / "fresh" / "salon.db"
    store.parent.mkdir()
    environment = {k: v for k, v in env.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    environment["AGENT_SALON_DB"] = str(store)
    ok(install(environment, proj, "team"))

    make_staff(environment, "a long enough password 1")
    with sqlite3.connect(store) as connection:
        users = connection.execute("SELECT username FROM auth_user").fetchall()
    assert users == [("staff",)]


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


def test_one_backup_per_file_holds_what_the_last_write_replaced(env, proj):
    original = (proj / LOCAL).read_bytes()
    ok(install(env, proj, "team"))
    (first,) = [b for b in backups(proj) if b.name.startswith("settings.local.json")]
    assert first.name == "settings.local.json.bak" and first.read_bytes() == original
    installed = (proj / LOCAL).read_bytes()
    ok(install(env, proj, "team,ops"))
    settings_backups = [b for b in backups(proj) if b.name.startswith("settings.local.json")]
    assert settings_backups == [first] and first.read_bytes() == installed
    home = proj.parent / "home"
    assert sorted(p.name for p in home.iterdir() if p.is_file()) == [
        ".claude.json",
        ".claude.json.bak",
    ]
    # The first run created ~/.claude.json (nothing to back up then), the second backed up
    # what the first wrote.
    assert json.loads((home / ".claude.json.bak").read_text())["projects"]
    assert not list(proj.rglob("*.salon-tmp")) and not list(home.rglob("*.salon-tmp"))


def test_http_writes_the_http_server_its_headers_helper_and_the_checkin_hook(env, proj, daemon):
    ok(install(env, proj, "team,ops", "--http", daemon.url + "/"))
    server = local_server(proj)
    assert server == {
        "type": "http",
        "url": f"{daemon.url}/mcp?label=web-app&room=team,ops",
        "headersHelper": f"{shlex.quote(sys.executable)} -m salon.cli hook mcp-headers",
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


def run_installed_session_start(env: dict, proj) -> subprocess.CompletedProcess:
    """The SessionStart command install wrote, run as Claude Code runs it, interactive."""
    (command,) = [c for e, c in ours(settings(proj)) if e == "SessionStart"]
    return subprocess.run(
        ["sh", "-c", command],
        env=dict(env, AGENT_SALON_HEADLESS="0"),
        cwd=proj,
        input=hook_input("session-start", "5ee5a10n-0000-0000-0000-000000000000", proj),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_installed_session_start_hook_runs_and_joins_the_rooms(env, proj):
    ok(install(env, proj, "team,ops"))
    clean = {k: v for k, v in env.items() if not k.startswith(("AGENT_SALON_", "DATABASE_"))}
    done = run_installed_session_start(clean, proj)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    text = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "this session is web-app#5ee5a10n" in text
    assert rooms_of(env, "web-app#5ee5a10n") == ["ops", "team"]


def test_the_skill_and_the_session_start_context_give_the_monitor_the_same_timeout(env, proj):
    ok(install(env, proj, "team"))
    done = run_installed_session_start(env, proj)
    text = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    skill = (proj / SKILL).read_text()
    # The longest Claude Code's Monitor allows; more is silently cut to it.
    assert re.findall(r"timeout_ms (\d+)", skill) == re.findall(r"timeout_ms (\d+)", text)
    assert re.findall(r"timeout_ms (\d+)", text) == ["600000"]


def test_install_with_no_room_is_a_usage_error(env, proj):
    done = install(env, proj)
    assert done.returncode == 2


# ---------------------------------------------------------------- the merge rules


def wanted(http=False, rooms="team"):
    return claudeconfig.wanted_hooks(
        {kind: f"X={rooms} /py -m salon.cli hook {kind}" for kind in claudeconfig.KINDS},
        http=http,
    )


def test_merge_into_nothing_makes_five_hooks():
    merge = claudeconfig.merge_hooks({}, wanted())
    assert merge.changed and merge.removed == []
    assert list(merge.data["hooks"]) == [
        "SessionStart", "Stop", "PostToolUse", "PreToolUse", "SessionEnd"
    ]  # fmt: skip
    assert merge.data["hooks"]["PostToolUse"][0]["matcher"] == "*"
    # The file claims' check runs before the editing tools only.
    pre = merge.data["hooks"]["PreToolUse"][0]
    assert pre["matcher"] == "Edit|Write|MultiEdit|NotebookEdit"
    assert pre["hooks"][0]["command"].endswith("hook pre-edit")


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
    assert len(merge.removed) == 6
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
    entry = claudeconfig.http_server(
        "https://salon.example/base/mcp/", "web-app", ["a", "b"], "salon hook mcp-headers"
    )
    assert entry == {
        "type": "http",
        "url": "https://salon.example/base/mcp?label=web-app&room=a,b",
        "headersHelper": "salon hook mcp-headers",
    }
    for bad in ("127.0.0.1:9315", "ftp://x", "http://x/?a=1"):
        with pytest.raises(ValueError):
            claudeconfig.base_url(bad)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a":1,"b":[1,2]}',
        b'{"a": 1, "b": [1, 2]}\n',
        b'{\n    "a": 1,\n    "b": [\n        1,\n        2\n    ]\n}',
        b'{\n\t"a": 1,\n\t"b": [\n\t\t1,\n\t\t2\n\t]\n}\n',
        b'{"a": "caf\\u00e9", "b": [1, 2]}',
    ],
)
def test_a_rewrite_keeps_the_files_own_style_byte_for_byte(raw):
    from mcpgate.claude.files import dump_like

    data = json.loads(raw)
    assert dump_like(data, raw) == raw
    data["c"] = True
    assert dump_like(data, raw).count(b"\n") == raw.count(b"\n") + (raw.count(b"\n") > 1)


def test_merge_mcp_keeps_other_servers():
    data = {"mcpServers": {"github": {"type": "http", "url": "https://x"}}}
    merge = claudeconfig.merge_mcp(data, {"type": "http", "url": "u"})
    assert list(merge.data["mcpServers"]) == ["github", "agent-salon"]
    assert not claudeconfig.merge_mcp(merge.data, {"type": "http", "url": "u"}).changed


def test_a_claude_directory_that_is_a_link_is_refused_naming_it(env, tmp_path):
    """A repository can hold symbolic links: install never writes through one."""
    path = project(tmp_path, "linked")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (path / ".claude").symlink_to(elsewhere)
    done = install(env, path, "team")
    assert done.returncode == 1
    assert ".claude is a symbolic link" in done.stderr and "nothing was changed" in done.stderr
    assert list(elsewhere.iterdir()) == [] and not (path / MCP).exists()


def test_a_backup_link_planted_where_the_backup_goes_is_replaced_not_followed(env, proj, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    ok(install(env, proj, "team"))
    (backup,) = [b for b in backups(proj) if b.name == "settings.local.json.bak"]
    backup.unlink()
    backup.symlink_to(victim)
    ok(install(env, proj, "team,ops"))
    assert victim.read_text() == "precious\n"
    assert not backup.is_symlink() and "hook stop" in backup.read_text()


def test_http_refuses_when_no_daemon_answers_and_writes_nothing(env, proj, tmp_path):
    before = snapshot(proj)
    done = install(env, proj, "team", "--http", "http://127.0.0.1:9")
    assert done.returncode == 1, done.stdout
    assert "no agent-salon daemon answers at http://127.0.0.1:9" in done.stderr
    assert "salon serve" in done.stderr and "Traceback" not in done.stderr
    assert snapshot(proj) == before


def test_http_refuses_a_daemon_of_another_store_and_writes_nothing(env, proj, daemon, tmp_path):
    """The hooks run with this command's store; a daemon of another one would take the
    MCP traffic into a store no hook reads."""
    other = tmp_path / "other"
    other.mkdir()
    elsewhere = dict(env, AGENT_SALON_DB=str(other / "salon.db"))
    if env.get("DATABASE_URL"):  # the store is the database, not the file
        elsewhere["DATABASE_URL"] = env["DATABASE_URL"].rsplit("/", 1)[0] + "/salon_elsewhere"
    before = snapshot(proj)
    done = install(elsewhere, proj, "team", "--http", daemon.url)
    assert done.returncode == 1
    assert "serves another store" in done.stderr and "Traceback" not in done.stderr
    assert snapshot(proj) == before


def portable_env(tmp_path) -> tuple[dict[str, str], Path]:
    """This installation's `salon` on PATH, the default store of a HOME of the test's own."""
    home, bindir = tmp_path / "home", tmp_path / "bin"
    bindir.mkdir()
    (bindir / "salon").symlink_to(Path(sys.executable).with_name("salon"))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_SALON_", "DATABASE_"))}
    for name in ("REDIS_URL", "PYTHONPATH", "DJANGO_SETTINGS_MODULE", "CLAUDE_CONFIG_DIR"):
        clean.pop(name, None)
    env = dict(
        clean,
        HOME=str(home),
        XDG_DATA_HOME=str(home / "data"),
        PATH=f"{bindir}{os.pathsep}{clean.get('PATH', '')}",
    )
    return env, bindir


def test_with_salon_on_path_and_the_default_store_the_files_name_nothing_of_this_machine(
    tmp_path,
):
    """A committed .mcp.json or settings.json must work on a teammate's machine."""
    env, bindir = portable_env(tmp_path)
    home = Path(env["HOME"])
    proj = project(tmp_path, "web-app")
    done = subprocess.run(
        [str(bindir / "salon"), "install", "team"], env=env, cwd=proj, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    written = (proj / SETTINGS).read_text() + (proj / MCP).read_text() + (proj / SKILL).read_text()
    for machine in (str(tmp_path), sys.executable, str(home)):
        assert machine not in written
    assert "this machine's paths" not in done.stdout
    assert "Use this and all future MCP servers in this project" in done.stdout
    assert not (proj / LOCAL).exists() and not (home / ".claude.json").exists()
    hooks = [c for _, c in ours(settings(proj, SETTINGS))]
    assert "AGENT_SALON_NAME=web-app AGENT_SALON_ROOM=team salon hook stop" in hooks
    server = json.loads((proj / MCP).read_text())["mcpServers"]["agent-salon"]
    assert server == {
        "type": "stdio",
        "command": "salon",
        "args": ["mcp"],
        "env": {"AGENT_SALON_NAME": "web-app", "AGENT_SALON_ROOM": "team"},
    }


def test_with_salon_on_path_and_the_default_store_the_hooks_print_plain_salon_commands(tmp_path):
    """The model is shown `salon wait`, as in the committed files, not this machine's
    interpreter and store paths; and that plain command reaches the same store."""
    env, bindir = portable_env(tmp_path)
    proj = project(tmp_path, "web-app")
    apidir = project(tmp_path, "api-service")
    salon_here = [str(bindir / "salon")]
    run = dict(env=env, capture_output=True, text=True, timeout=120)
    assert subprocess.run([*salon_here, "install", "team"], cwd=proj, **run).returncode == 0
    commands = dict(ours(settings(proj, SETTINGS)))
    session = "5ee5a10n-0000-0000-0000-000000000000"

    def hook(event: str) -> str:
        kind = {"SessionStart": "session-start", "Stop": "stop"}[event]
        done = subprocess.run(
            ["sh", "-c", commands[event]], cwd=proj, input=hook_input(kind, session, proj),
            **dict(run, env=dict(env, AGENT_SALON_HEADLESS="0")),
        )  # fmt: skip
        assert done.returncode == 0 and done.stderr == "", done.stderr
        return done.stdout

    def ask(text: str) -> None:
        argv = [*salon_here, "send", "team", "QUESTION", text]
        assert subprocess.run(argv, cwd=apidir, **run).returncode == 0

    text = json.loads(hook("SessionStart"))["hookSpecificOutput"]["additionalContext"]
    ask("who owns the login form?")
    reason = json.loads(hook("Stop"))["reason"]

    for shown in (text, reason):
        for machine in (str(tmp_path), sys.executable, "AGENT_SALON_DB", "salon.cli"):
            assert machine not in shown
    monitor = next(line.strip() for line in text.splitlines() if line.strip().endswith(" wait"))
    assert monitor == (
        f"AGENT_SALON_NAME=web-app AGENT_SALON_ROOM=team CLAUDE_CODE_SESSION_ID={session} "
        "salon wait"
    )
    assert f"CLAUDE_CODE_SESSION_ID={session} salon inbox team" in reason
    ask("and the signup form?")
    told = subprocess.run(["sh", "-c", monitor + " --once"], cwd=proj, **run)
    assert told.returncode == 0 and "and the signup form?" in told.stdout, told.stderr


def test_a_store_named_by_a_variable_goes_into_the_personal_files_and_the_report_says_why(
    env, proj
):
    done = ok(install(env, proj, "team"))
    assert local_server(proj)["env"]["AGENT_SALON_DB"] == env["AGENT_SALON_DB"]
    assert "name this machine's paths (this installation's `salon` is not on PATH)" in (done.stdout)
    assert "the hooks into .claude/settings.local.json" in done.stdout
    assert "the MCP server into Claude Code's local MCP scope" in done.stdout
    # A local-scope server needs no approval: the project-MCP question is not asked.
    assert "Use this and all future MCP servers" not in done.stdout


# ---------------------------------------------------------------- personal or shared files


def test_a_personal_install_moves_our_hooks_out_of_the_shared_settings_and_names_them(env, proj):
    theirs = {"type": "command", "command": "make lint"}
    ours_ = {"type": "command", "command": "salon hook stop"}
    shared = {"hooks": {"Stop": [{"hooks": [ours_, theirs]}]}}
    (proj / SETTINGS).write_text(json.dumps(shared))
    done = ok(install(env, proj, "team"))
    assert settings(proj, SETTINGS) == {"hooks": {"Stop": [{"hooks": [theirs]}]}}
    assert (
        "removed from .claude/settings.json: Stop: salon hook stop "
        "(moved to .claude/settings.local.json)" in done.stdout
    )
    assert len(ours(settings(proj))) == 5


def test_a_personal_install_removes_a_machine_specific_server_from_mcp_json_and_keeps_others(
    env, proj
):
    machine = {"type": "stdio", "command": "/venv/bin/python", "args": ["-m", "salon.cli", "mcp"]}
    github = {"type": "http", "url": "https://x"}
    (proj / MCP).write_text(json.dumps({"mcpServers": {"github": github, "agent-salon": machine}}))
    done = ok(install(env, proj, "team"))
    assert json.loads((proj / MCP).read_text()) == {"mcpServers": {"github": github}}
    assert "(moved to the local MCP scope)" in done.stdout


def test_a_personal_install_keeps_the_teams_portable_server_in_mcp_json(env, proj):
    """The team's committed entry stays; the local scope takes precedence for this person."""
    team = {"mcpServers": {"agent-salon": {"type": "stdio", "command": "salon", "args": ["mcp"]}}}
    (proj / MCP).write_text(json.dumps(team))
    ok(install(env, proj, "team"))
    assert json.loads((proj / MCP).read_text()) == team
    assert local_server(proj)["command"] == sys.executable


def test_the_local_scope_keeps_every_other_key_of_the_user_configuration(env, proj):
    home = proj.parent / "home"
    theirs = {
        "numStartups": 7,
        "projects": {
            "/elsewhere": {"mcpServers": {"agent-salon": {"type": "http", "url": "u"}}},
            str(proj.resolve()): {"allowedTools": ["Bash"], "mcpServers": {"db": {"url": "d"}}},
        },
    }
    (home / ".claude.json").write_text(json.dumps(theirs, indent=2))
    (home / ".claude.json").chmod(0o600)
    ok(install(env, proj, "team"))
    data = user_config(proj)
    assert data["numStartups"] == 7
    assert data["projects"]["/elsewhere"] == theirs["projects"]["/elsewhere"]
    mine = data["projects"][str(proj.resolve())]
    assert mine["allowedTools"] == ["Bash"] and list(mine["mcpServers"]) == ["db", "agent-salon"]
    assert (home / ".claude.json").stat().st_mode & 0o777 == 0o600
    assert json.loads((home / ".claude.json.bak").read_text()) == theirs


def test_an_invalid_user_configuration_is_refused_and_nothing_is_written(env, proj):
    (proj.parent / "home" / ".claude.json").write_text('{"projects": [')
    before = snapshot(proj)
    done = install(env, proj, "team")
    assert done.returncode == 1 and "~/.claude.json is not valid JSON" in done.stderr
    assert snapshot(proj) == before


def test_a_user_configuration_that_is_a_link_is_refused(env, proj, tmp_path):
    real = tmp_path / "dotfiles.json"
    real.write_text("{}")
    (proj.parent / "home" / ".claude.json").symlink_to(real)
    done = install(env, proj, "team")
    assert done.returncode == 1 and "~/.claude.json is a symbolic link" in done.stderr
    assert real.read_text() == "{}" and not (proj / LOCAL).read_text().count("salon")


def test_claude_config_dir_names_the_user_configuration(env, proj, tmp_path):
    config_dir = tmp_path / "cc"
    config_dir.mkdir()
    ok(install(dict(env, CLAUDE_CONFIG_DIR=str(config_dir)), proj, "team"))
    data = json.loads((config_dir / ".claude.json").read_text())
    assert "agent-salon" in data["projects"][str(proj.resolve())]["mcpServers"]
    assert not (proj.parent / "home" / ".claude.json").exists()


def test_with_claude_on_path_the_local_scope_is_written_by_claude_mcp_add_json(env, proj, tmp_path):
    bindir, log = tmp_path / "fakebin", tmp_path / "claude-calls"
    bindir.mkdir()
    (bindir / "claude").write_text(f'#!/bin/sh\nprintf "%s|" "$PWD" "$@" >> {log}\necho >> {log}\n')
    (bindir / "claude").chmod(0o755)
    done = ok(install(dict(env, PATH=f"{bindir}{os.pathsep}{env['PATH']}"), proj, "team"))
    (call,) = log.read_text().splitlines()
    cwd, *args = call.rstrip("|").split("|")
    assert cwd == str(proj)
    assert args[:5] == ["mcp", "add-json", "--scope", "local", "agent-salon"]
    assert json.loads(args[5])["args"] == ["-m", "salon.cli", "mcp"]
    assert "by `claude mcp add-json --scope local`" in done.stdout


def test_a_portable_install_removes_our_server_from_the_local_scope(tmp_path):
    """A local-scope server of ours would take precedence over the committed .mcp.json."""
    env, bindir = portable_env(tmp_path)
    proj = project(tmp_path, "web-app")
    home = Path(env["HOME"])
    home.mkdir(parents=True, exist_ok=True)
    old = {"type": "stdio", "command": "/old/python", "args": ["-m", "salon.cli", "mcp"]}
    key = str(proj.resolve())
    (home / ".claude.json").write_text(json.dumps({"projects": {key: {"mcpServers": {
        "agent-salon": old, "db": {"url": "d"}}}}}))  # fmt: skip
    done = subprocess.run(
        [str(bindir / "salon"), "install", "team"], env=env, cwd=proj, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads((home / ".claude.json").read_text())
    assert data["projects"][key]["mcpServers"] == {"db": {"url": "d"}}
    assert "it would take precedence over .mcp.json" in done.stdout


def test_the_project_key_is_the_git_root_and_a_worktrees_main_checkout(tmp_path):
    from mcpgate.claude.files import project_key

    main = tmp_path / "repo"
    (main / ".git" / "worktrees" / "wt").mkdir(parents=True)
    (main / "sub").mkdir()
    assert project_key(main / "sub") == str(main.resolve())
    worktree = tmp_path / "wt"
    worktree.mkdir()
    (worktree / ".git").write_text(f"gitdir: {main}/.git/worktrees/wt\n")
    (main / ".git" / "worktrees" / "wt" / "commondir").write_text("../..\n")
    assert project_key(worktree) == str(main.resolve())
    plain = tmp_path / "plain"
    plain.mkdir()
    assert project_key(plain) == str(plain.resolve())


# ---------------------------------------------------------------- uninstall


def uninstall(env, proj, *args):
    return run_salon("uninstall", *args, env=env, cwd=proj)


def test_uninstall_restores_the_personal_settings_byte_for_byte_and_removes_the_rest(env, proj):
    original = (proj / LOCAL).read_bytes()
    home = proj.parent / "home"
    (home / ".claude.json").write_text(json.dumps({"numStartups": 3}, indent=2) + "\n")
    ok(install(env, proj, "team,ops"))
    ok(install(env, proj, "team"))  # a second run: a backup beside the skill too
    done = ok(uninstall(env, proj))
    assert (proj / LOCAL).read_bytes() == original
    assert not (proj / ".claude" / "skills").exists()
    # What the local scope held for this project goes with our server: nothing empty is left.
    assert (home / ".claude.json").read_text() == json.dumps({"numStartups": 3}, indent=2) + "\n"
    removed = [line for line in done.stdout.splitlines() if "removed from" in line]
    assert len(removed) == 6  # five hooks and the server
    assert ".claude/skills/salon/SKILL.md: removed" in done.stdout
    assert f"backup: {BACKUPS}" in done.stdout and "/.claude/settings.local.json.bak" in done.stdout


def test_uninstall_removes_the_files_a_portable_install_created_and_keeps_backups_outside(
    tmp_path,
):
    env, bindir = portable_env(tmp_path)
    proj = project(tmp_path, "web-app")
    for command in ("install team", "uninstall"):
        done = subprocess.run(
            [str(bindir / "salon"), *command.split()], env=env, cwd=proj, capture_output=True,
            text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    assert list(proj.iterdir()) == []
    assert ".mcp.json: removed (backup: ~/data/agent-salon/backups/web-app-" in done.stdout
    kept = Path(env["XDG_DATA_HOME"]) / "agent-salon" / "backups"
    assert sorted(p.name for p in kept.rglob("*.bak")) == [".mcp.json.bak", "settings.json.bak"]


# A teammate's committed files, each on one compact line, as many tools write them.
COMMITTED_MCP = b'{"mcpServers":{"github":{"type":"http","url":"https://x"}}}'
COMMITTED_SETTINGS = json.dumps(THEIRS).encode() + b"\n"


def git(proj: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=proj, capture_output=True, text=True, check=True, timeout=30
    ).stdout


def committed_project(tmp_path) -> Path:
    """A git repository holding a compact .mcp.json and .claude/settings.json, committed."""
    proj = project(tmp_path, "web-app")
    git(proj, "init", "-q")
    (proj / MCP).write_bytes(COMMITTED_MCP)
    (proj / ".claude").mkdir()
    (proj / SETTINGS).write_bytes(COMMITTED_SETTINGS)
    git(proj, "add", "-A")
    git(proj, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "theirs")
    return proj


def git_state(proj: Path) -> tuple[str, dict[str, bytes]]:
    """What git sees (untracked and ignored files named one by one) and every file's bytes."""
    status = git(proj, "status", "--porcelain", "--ignored", "--untracked-files=all")
    files_ = {
        str(p.relative_to(proj)): p.read_bytes()
        for p in sorted(proj.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(proj).parts
    }
    return status, files_


@pytest.mark.parametrize(
    "runs",
    [
        [["team"]],
        [["team", "--triage"]],
        # A second install that changes the files: the backups then hold the first one's.
        [["team"], ["team,ops", "--triage"]],
        [["team"], ["team", "--http", "{url}"]],
    ],
    ids=["once", "triage", "twice", "http"],
)
def test_install_then_uninstall_leaves_git_status_and_every_byte_as_before(tmp_path, runs):
    env, bindir = portable_env(tmp_path)
    proj = committed_project(tmp_path)
    before = git_state(proj)
    daemon = None
    if any("{url}" in args for args in runs):
        daemon = Daemon(env=env, cwd=tmp_path).start()
    try:
        for args in [*runs, ["uninstall"]]:
            args = [a.replace("{url}", daemon.url) if daemon else a for a in args]
            command = args if args == ["uninstall"] else ["install", *args]
            done = subprocess.run(
                [str(bindir / "salon"), *command], env=env, cwd=proj, capture_output=True,
                text=True, timeout=120,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            if command[0] == "install":
                # Installed, the compact files stay compact: git shows one changed line each.
                assert b"\n" not in (proj / MCP).read_bytes()
                assert (proj / SETTINGS).read_bytes().count(b"\n") == 1
    finally:
        if daemon:
            daemon.stop()
    assert git_state(proj) == before
    assert not list(proj.rglob("*.bak"))
    assert not (Path(env["HOME"]) / ".claude.json").exists()


def test_http_in_the_committed_mcp_json_says_it_names_the_daemons_address(tmp_path):
    """A teammate who clones the project gets the address too: the report says so."""
    env, bindir = portable_env(tmp_path)
    proj = project(tmp_path, "web-app")
    daemon = Daemon(env=env, cwd=tmp_path).start()
    try:
        done = subprocess.run(
            [str(bindir / "salon"), "install", "team", "--http", daemon.url], env=env,
            cwd=proj, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        daemon.stop()
    assert done.returncode == 0, done.stderr
    assert json.loads((proj / MCP).read_text())["mcpServers"]["agent-salon"]["type"] == "http"
    assert f".mcp.json, a file to commit, names this daemon's address ({daemon.url})" in (
        done.stdout
    )
    assert "a teammate's sessions need an agent-salon daemon there too" in done.stdout


def test_a_personal_install_then_uninstall_leaves_git_status_and_the_user_config_as_before(
    env, tmp_path, daemon
):
    """The personal files (settings.local.json, the local MCP scope) go as they came: the
    user configuration gets its own bytes back, with no empty `mcpServers` of ours."""
    proj = committed_project(tmp_path)
    home = Path(env["HOME"])
    theirs = b'{"numStartups":3,"projects":{"/elsewhere":{"allowedTools":[]}}}'
    (home / ".claude.json").write_bytes(theirs)
    before = git_state(proj)
    ok(install(env, proj, "team"))
    ok(install(env, proj, "team", "--http", daemon.url))
    assert local_server(proj)["url"].startswith(daemon.url)
    ok(uninstall(env, proj))
    assert git_state(proj) == before
    assert not list(proj.rglob("*.bak"))
    assert (home / ".claude.json").read_bytes() == theirs

    # A user configuration install created goes again, leaving nothing empty behind.
    (home / ".claude.json").unlink()
    ok(install(env, proj, "team"))
    ok(uninstall(env, proj))
    assert git_state(proj) == before
    assert not (home / ".claude.json").exists()


def test_uninstall_finds_our_entries_in_every_file_and_keeps_everything_else(env, proj):
    shared = {"hooks": {"PostToolUse": [{"matcher": "*", "hooks": [
        {"type": "command", "command": "salon hook heartbeat", "timeout": 10},
        {"type": "command", "command": "./log.sh"}]}]}}  # fmt: skip
    (proj / SETTINGS).write_text(json.dumps(shared))
    github = {"type": "http", "url": "https://x"}
    (proj / MCP).write_text(json.dumps({"mcpServers": {"agent-salon": {"command": "salon"},
                                                       "github": github}}))  # fmt: skip
    done = ok(uninstall(env, proj))
    assert settings(proj, SETTINGS) == {"hooks": {"PostToolUse": [{"matcher": "*", "hooks": [
        {"type": "command", "command": "./log.sh"}]}]}}  # fmt: skip
    assert json.loads((proj / MCP).read_text()) == {"mcpServers": {"github": github}}
    assert settings(proj) == THEIRS and "settings.local.json: unchanged" not in done.stdout
    assert len([line for line in done.stdout.splitlines() if "removed from" in line]) == 2


def test_uninstall_dry_run_changes_nothing_and_says_what_it_would_remove(env, proj):
    ok(install(env, proj, "team"))
    before = snapshot(proj)
    done = ok(uninstall(env, proj, "--dry-run"))
    assert snapshot(proj) == before
    assert "would be removed from .claude/settings.local.json: Stop:" in done.stdout
    assert ".claude/skills/salon/SKILL.md: would be removed" in done.stdout


def test_uninstall_refuses_an_invalid_file_and_changes_nothing(env, proj):
    ok(install(env, proj, "team"))
    (proj / MCP).write_text("{oops")
    before = snapshot(proj)
    done = uninstall(env, proj)
    assert done.returncode == 1 and ".mcp.json is not valid JSON" in done.stderr
    assert snapshot(proj) == before


def test_uninstall_where_nothing_was_installed_says_so_and_opens_no_store(env, tmp_path):
    proj = project(tmp_path, "bare")
    store = tmp_path / "empty" / "salon.db"
    store.parent.mkdir()
    done = ok(uninstall(dict(env, AGENT_SALON_DB=str(store)), proj))
    assert "nothing of agent-salon's was found here" in done.stdout
    assert list(store.parent.iterdir()) == [] and list(proj.iterdir()) == []


def test_the_command_list_names_uninstall(env):
    assert "uninstall" in ok(salon(env, "help")).stdout


# ---------------------------------------------------------------- --plugin


def plugin_root(env) -> Path:
    return Path(env["HOME"]) / ".local" / "share" / "agent-salon" / "claude-plugin"


def assert_the_plugin_hooks_monitor_and_skill(plugin: Path) -> None:
    """The plugin's hooks run salon's hooks, its monitor watches, its skill arms nothing."""
    hooks = json.loads((plugin / "hooks" / "hooks.json").read_text())["hooks"]
    assert list(hooks) == ["SessionStart", "Stop", "PostToolUse", "PreToolUse", "SessionEnd"]
    assert hooks["PreToolUse"][0]["hooks"][0]["command"].endswith("-m salon.cli hook pre-edit")
    assert hooks["Stop"][0]["hooks"][0]["command"].endswith("-m salon.cli hook stop")
    start = hooks["SessionStart"][0]["hooks"][0]["command"]
    assert "AGENT_SALON_WATCHED=1" in start  # the monitor below watches: arm nothing
    assert "AGENT_SALON_WATCHED" not in hooks["Stop"][0]["hooks"][0]["command"]
    (monitor,) = json.loads((plugin / "monitors" / "monitors.json").read_text())
    assert monitor["when"] == "always" and monitor["command"].endswith("-m salon.cli wait")
    assert "AGENT_SALON_ROOM=team,ops" in monitor["command"]
    skill = (plugin / "skills" / "salon" / "SKILL.md").read_text()
    assert skill.startswith("---\nname: salon\n") and "nothing to arm" in skill


def test_install_plugin_writes_a_local_marketplace_in_the_layout_claude_code_reads(env, proj):
    env = {k: v for k, v in env.items() if k != "XDG_DATA_HOME"}
    before = snapshot(proj)
    done = ok(install(env, proj, "--plugin", "team,ops"))
    root = plugin_root(env)
    catalog = json.loads((root / ".claude-plugin" / "marketplace.json").read_text())
    assert catalog["name"] == "agent-salon-local"
    assert catalog["plugins"][0]["name"] == "agent-salon"
    assert catalog["plugins"][0]["source"] == "./agent-salon"
    plugin = root / "agent-salon"
    manifest = json.loads((plugin / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "agent-salon" and manifest["version"]
    server = json.loads((plugin / ".mcp.json").read_text())["mcpServers"]["agent-salon"]
    assert server["args"] == ["-m", "salon.cli", "mcp"]
    assert server["env"]["AGENT_SALON_ROOM"] == "team,ops"
    assert "AGENT_SALON_NAME" not in server["env"]  # each project is its own agent
    assert_the_plugin_hooks_monitor_and_skill(plugin)
    # The project is not touched; the user's Claude Code configuration neither, without
    # `claude` on PATH: the report gives the two commands to run.
    assert {k: v for k, v in snapshot(proj).items() if "claude-plugin" not in k} == before
    assert f"claude plugin marketplace add {root}" in done.stdout
    assert "claude plugin install agent-salon@agent-salon-local --scope user" in done.stdout
    assert {r["room"] for r in ok_json(salon(env, "rooms", "--json"))} >= {"team", "ops"}


def with_recording_claude(env, tmp_path):
    """(env with a `claude` first on PATH that only writes its arguments down, the file
    it writes them to): which `claude` steps install and uninstall run, nothing more (the
    real CLI's side is tests/test_claude_cli.py's)."""
    bindir, log = tmp_path / "fakebin", tmp_path / "claude-calls"
    bindir.mkdir()
    (bindir / "claude").write_text(f'#!/bin/sh\necho "$*" >> {log}\n')
    (bindir / "claude").chmod(0o755)
    return dict(env, PATH=f"{bindir}{os.pathsep}{env['PATH']}"), log


def test_install_plugin_runs_claude_to_add_the_marketplace_and_install_it(env, proj, tmp_path):
    env = {k: v for k, v in env.items() if k != "XDG_DATA_HOME"}
    path_env, log = with_recording_claude(env, tmp_path)
    ok(install(path_env, proj, "--plugin", "team"))
    assert log.read_text().splitlines() == [
        f"plugin marketplace add {plugin_root(env)}",
        "plugin install agent-salon@agent-salon-local --scope user",
    ]
    done = ok(install(path_env, proj, "--plugin", "team"))
    assert "6 files, unchanged" in done.stdout


def test_install_plugin_names_what_an_earlier_project_install_left(env, proj):
    env = {k: v for k, v in env.items() if k != "XDG_DATA_HOME"}
    ok(install(env, proj, "team"))
    done = ok(install(env, proj, "--plugin", "team"))
    assert "both would run; `salon uninstall` there removes them" in done.stdout


def test_install_plugin_names_a_project_install_in_another_directory(env, proj, tmp_path):
    """The plugin serves every project: an earlier `salon install` anywhere the store
    knows of would run beside it, not only one in the directory the plugin is installed from."""
    ok(install(env, proj, "team"))
    elsewhere = project(tmp_path, "elsewhere")
    done = ok(install(env, elsewhere, "--plugin", "team"))
    assert "both would run; `salon uninstall` there removes them" in done.stdout
    assert f"    {proj.resolve()} (.claude/settings.local.json, " in done.stdout
    assert str(elsewhere.resolve()) not in done.stdout.split("note:")[-1]


def test_install_plugin_dry_run_and_http_write_nothing(env, proj):
    env = {k: v for k, v in env.items() if k != "XDG_DATA_HOME"}
    before = snapshot(proj)
    assert (
        "6 files, 6 would be created" in ok(install(env, proj, "--plugin", "t", "--dry-run")).stdout
    )
    done = install(env, proj, "--plugin", "team", "--http", "http://127.0.0.1:9")
    assert done.returncode == 2 and "leave out --http" in done.stderr
    assert snapshot(proj) == before and not plugin_root(env).exists()


def test_install_triage_wires_a_headless_toolless_claude_as_the_judge(env, proj):
    from salon.config import triage_command

    ok(install(env, proj, "team", "--triage"))
    server = local_server(proj)
    argv = triage_command(server["env"]["AGENT_SALON_TRIAGE_CMD"])
    assert argv[:2] == ["claude", "-p"]
    assert argv[argv.index("--tools") + 1] == ""  # no tools at all
    assert json.loads(argv[argv.index("--settings") + 1]) == {"disableAllHooks": True}
    assert "--strict-mcp-config" in argv
    stop = [c for event, c in ours(settings(proj)) if event == "Stop"]
    assert stop and all("AGENT_SALON_TRIAGE_CMD=" in c for c in stop)


def test_install_triage_says_it_sets_the_judge_and_a_dry_run_says_it_would(env, proj):
    before = snapshot(proj)
    done = ok(install(env, proj, "team", "--triage", "--dry-run"))
    assert snapshot(proj) == before
    assert "judge: AGENT_SALON_TRIAGE_CMD would be set to `claude -p --model haiku" in done.stdout
    done = ok(install(env, proj, "team", "--triage"))
    assert "judge: AGENT_SALON_TRIAGE_CMD set to `claude -p --model haiku" in done.stdout
    assert "the MCP server's environment" in done.stdout


def test_install_without_triage_sets_no_judge(env, proj):
    ok(install(env, proj, "team"))
    assert "AGENT_SALON_TRIAGE_CMD" not in local_server(proj)["env"]


def test_uninstall_plugin_has_claude_forget_the_plugin_and_removes_its_files(env, proj, tmp_path):
    env = {k: v for k, v in env.items() if k != "XDG_DATA_HOME"}
    path_env, log = with_recording_claude(env, tmp_path)
    ok(install(path_env, proj, "--plugin", "team"))
    assert plugin_root(env).is_dir()
    log.unlink()

    done = ok(run_salon("uninstall", "--plugin", env=path_env, cwd=proj))

    assert log.read_text().splitlines() == [
        "plugin uninstall agent-salon@agent-salon-local --scope user",
        "plugin marketplace remove agent-salon-local",
    ]
    assert not plugin_root(env).exists()
    assert "removed" in done.stdout
