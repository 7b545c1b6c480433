"""`salon install --client gemini` on a temporary project and HOME, its hooks run as Gemini
CLI runs them (JSON on stdin), and the pure parts: the trust of a folder, the server's
entry, the settings merge. No Gemini CLI needed (tests/test_gemini_cli.py drives the
real one)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from mcpgate.claude.config import ShapeError
from mcpgate.gemini import config as geminiconfig
from tests.claude_kit import hook_json, ok, ok_json
from tests.support import run_salon
from tests.test_codex_install import LINKED, QUOTED, tree

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


# ---------------------------------------------------------------- a hostile environment

KEPT = "; it was left untouched and nothing was changed"
NOT_JSON = " — fix the file (or move it away) and run the command again"


def refused(env, proj, tmp_path, message: str) -> None:
    """install fails with exactly `message` and changes nothing anywhere."""
    before = tree(tmp_path)
    done = install(env, proj)
    assert (done.returncode, done.stderr) == (1, f"salon install: {message}\n")
    assert tree(tmp_path) == before


def data_dir(env) -> Path:
    return Path(env["XDG_DATA_HOME"]) / "agent-salon"


LINKS = {
    ".gemini": (".gemini", "../outside", ".gemini/settings.json"),
    "~/.gemini": ("~/.gemini", "../outside", "~/.gemini/trustedFolders.json"),
    "~/.gemini/trustedFolders.json": ("~/.gemini/trustedFolders.json", "../../outside/file",
                                      "~/.gemini/trustedFolders.json"),
    "GEMINI_CLI_TRUSTED_FOLDERS_PATH": ("tf/trusted.json", "../outside/file", "TF"),
    "salon's note": ("note", "../../../../outside/file", "gemini-trusted-folders.json"),
}  # fmt: skip


@pytest.mark.parametrize("at", LINKS)
def test_a_planted_link_is_refused_and_neither_it_nor_its_target_is_touched(
    env, proj, tmp_path, at
):
    link, to, label = LINKS[at]
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "file").write_text('{"folders": []}\n')
    place = {
        "~": Path(env["HOME"]) / link[2:],
        "tf": tmp_path / link,
        "note": data_dir(env) / "gemini-trusted-folders.json",
    }.get(link.split("/")[0], proj / link)
    if place.is_dir():
        shutil.rmtree(place)
    place.unlink(missing_ok=True)
    place.parent.mkdir(parents=True, exist_ok=True)
    place.symlink_to(to)
    if label == "TF":
        env = dict(env, GEMINI_CLI_TRUSTED_FOLDERS_PATH=str(place))
        label = str(place)
    shown = {"~": link[2:], "note": place.name}.get(link.split("/")[0], link)

    refused(env, proj, tmp_path, LINKED.format(link=shown, to=to, label=label))

    assert (tmp_path / "outside" / "file").read_text() == '{"folders": []}\n'
    assert sorted(os.listdir(tmp_path / "outside")) == ["file"]


def test_a_link_planted_at_a_backup_path_is_replaced_and_its_target_untouched(env, proj, tmp_path):
    mine = with_settings(proj, json.dumps(THEIRS) + "\n").read_bytes()
    users = trust_file(env).read_bytes()
    target = tmp_path / "outside"
    target.write_text("precious\n")
    folder = f"{proj.name}-{hashlib.sha256(str(proj.resolve()).encode()).hexdigest()[:8]}"
    backups = (data_dir(env) / "backups" / folder / ".gemini" / "settings.json.bak",
               trust_file(env).with_name("trustedFolders.json.bak"))  # fmt: skip
    for backup in backups:
        backup.parent.mkdir(parents=True, exist_ok=True)
        backup.symlink_to(target)

    ok(install(env, proj))

    assert target.read_text() == "precious\n"
    assert [b.is_symlink() for b in backups] == [False, False]
    assert [b.read_bytes() for b in backups] == [mine, users]


SHAPE = "~/.gemini/trustedFolders.json is not in the shape Gemini reads; nothing was changed"
TRUST_NOT_READ = {
    "a list": (b"[1, 2]", SHAPE),
    "a string": (b'"x"', SHAPE),
    "a number for a value": (b'{"/a": 5}', SHAPE),
    "not UTF-8": (
        b'{"/a": "\xff"}',
        "~/.gemini/trustedFolders.json is not valid JSON (not UTF-8, a bad byte at offset 8)"
        + KEPT
        + NOT_JSON,
    ),
    "100000 nested lists": (
        b"[" * 100_000 + b"]" * 100_000,
        "~/.gemini/trustedFolders.json is not valid JSON (nested more than 512 levels deep)"
        + KEPT
        + NOT_JSON,
    ),
    "100000 nested objects": (
        b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
        "~/.gemini/trustedFolders.json is not valid JSON (nested more than 512 levels deep)"
        + KEPT
        + NOT_JSON,
    ),
}


@pytest.mark.parametrize("case", TRUST_NOT_READ)
def test_trusted_folders_gemini_would_not_read_are_refused_and_nothing_changes(
    env, proj, tmp_path, case
):
    raw, message = TRUST_NOT_READ[case]
    trust_file(env).write_bytes(raw)

    refused(env, proj, tmp_path, message)


SETTINGS_NOT_READ = {
    "hooks a string": ('{"hooks": "x"}', '.gemini/settings.json: "hooks" is not an object'),
    "mcpServers a list": (
        '{"mcpServers": []}', '.gemini/settings.json: "mcpServers" is not an object'
    ),
    "hooks.BeforeTool an object": (
        '{"hooks": {"BeforeTool": {}}}', '.gemini/settings.json: "hooks.BeforeTool" is not a list'
    ),
    "mcpServers.salon a string": (
        '{"mcpServers": {"salon": "x"}}',
        '.gemini/settings.json: "mcpServers.salon" is a server of your own (it does not run '
        "`salon mcp`)",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", SETTINGS_NOT_READ)
def test_settings_gemini_would_not_read_are_refused_and_nothing_changes(env, proj, tmp_path, case):
    text, message = SETTINGS_NOT_READ[case]
    with_settings(proj, text)

    refused(env, proj, tmp_path, message + KEPT)


def test_a_note_not_in_salons_shape_is_refused_and_nothing_changes(env, proj, tmp_path):
    note = data_dir(env) / "gemini-trusted-folders.json"
    note.parent.mkdir(parents=True)
    note.write_text("[1]\n")

    refused(env, proj, tmp_path,
            f"{note} (salon's note of the folders it trusted) is not in the shape salon "
            "writes; nothing was changed: move it away and run the command again")  # fmt: skip


@pytest.mark.parametrize("plain", ["~/.gemini", "the data directory"])
def test_a_folder_that_is_a_plain_file_is_refused_before_anything_is_written(
    env, proj, tmp_path, plain
):
    with_settings(proj, json.dumps(THEIRS) + "\n")  # backed up: the data directory
    folder, label = {
        "~/.gemini": (
            trust_file(env).parent, "~/.gemini/trustedFolders.json (Gemini trusted folders)"
        ),
        "the data directory": (data_dir(env), ".gemini/settings.json"),
    }[plain]  # fmt: skip
    if folder.exists():
        shutil.rmtree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.write_text("a file\n")

    refused(env, proj, tmp_path,
            f"cannot write {label}: {folder} is not a folder salon can write in; nothing was "
            "changed")  # fmt: skip


def test_a_path_that_needs_quoting_gets_valid_files_and_hooks_that_run(env, tmp_path):
    proj = tmp_path / QUOTED
    proj.mkdir()
    subprocess.run(["git", "init", "-q", str(proj)], check=True)
    store = proj / "st ore$'\".db"
    shutil.copyfile(env["AGENT_SALON_DB"], store)
    store.chmod(0o600)
    env = dict(env, AGENT_SALON_NAME="web", AGENT_SALON_DB=str(store))
    users = trust_file(env).read_bytes()

    ok(install(env, proj))

    assert json.loads(trust_file(env).read_text()) == {**USERS, str(proj): "TRUST_FOLDER"}
    hooks = json.loads((proj / ".gemini" / "settings.json").read_text())["hooks"]
    command = hooks["SessionStart"][0]["hooks"][0]["command"]
    bare = {k: v for k, v in env.items() if not k.startswith("AGENT_SALON_")}
    payload = {"session_id": SESSION, "cwd": str(proj), "hook_event_name": "SessionStart",
               "transcript_path": None, "source": "startup"}  # fmt: skip
    ran = subprocess.run(["bash", "-c", command], cwd=proj, env=bare, capture_output=True,
                         text=True, input=json.dumps(payload), timeout=60)  # fmt: skip
    said = hook_json(ran)["hookSpecificOutput"]["additionalContext"]
    assert f"this session is web#{SESSION[:8]} on the bus" in said
    assert ok(install(env, proj)).stdout.count("unchanged") == 2

    uninstall(env, proj)
    assert trust_file(env).read_bytes() == users and not (proj / ".gemini").exists()
