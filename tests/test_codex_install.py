"""`salon install --client codex` on a temporary project and HOME, its hooks run as Codex
runs them (JSON on stdin), and the pure parts: Codex's trust hash, a patch's files, the
TOML edits. No Codex CLI needed (tests/test_codex_cli.py drives the real one)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
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
    assert (server["startup_timeout_sec"], server["tool_timeout_sec"]) == (30, 600)
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


# ---------------------------------------------------------------- a hostile environment

LINKED = (
    "{link} is a symbolic link (to '{to}'); salon does not write through links, so {label} "
    "was left untouched and nothing was changed: edit the file it points to yourself, or "
    "replace the link with a copy, and run the command again"
)
KEPT = " it was left untouched and nothing was changed"


def tree(root: Path) -> dict[str, bytes | str | None]:
    """Every path under root: a file's bytes, a link's target, None for a folder (the
    store and its secret left out)."""
    found: dict[str, bytes | str | None] = {}
    for folder, dirs, names in os.walk(root):
        for name in [*dirs, *names]:
            path = Path(folder) / name
            if name.startswith(("salon.db", ".agent-salon-secret")):
                continue
            key = str(path.relative_to(root))
            if path.is_symlink():
                found[key] = os.readlink(path)
            else:
                found[key] = path.read_bytes() if path.is_file() else None
    return found


def refused(env, proj, tmp_path, message: str, *args) -> None:
    """install fails with exactly `message` and changes nothing anywhere."""
    before = tree(tmp_path)
    done = install(env, proj, *args)
    assert (done.returncode, done.stderr) == (1, f"salon install: {message}\n")
    assert tree(tmp_path) == before


def backup_of(env, proj, relative: str) -> Path:
    folder = f"{proj.name}-{hashlib.sha256(str(proj.resolve()).encode()).hexdigest()[:8]}"
    data = Path(env["XDG_DATA_HOME"]) / "agent-salon" / "backups" / folder
    return data / f"{relative}.bak"


@pytest.mark.parametrize(
    ("at", "link", "to", "label"),
    [
        (".codex", ".codex", "../outside", CONFIG_LABEL := ".codex/config.toml"),
        (".codex/hooks.json", ".codex/hooks.json", "../../outside/file", ".codex/hooks.json"),
        (".codex/config.toml", ".codex/config.toml", "../../outside/file", CONFIG_LABEL),
        (
            "~/.codex/config.toml",
            ".codex/config.toml",
            "../../outside/file",
            "~/.codex/config.toml",
        ),
    ],
)
def test_a_planted_link_is_refused_and_neither_it_nor_its_target_is_touched(
    env, proj, tmp_path, at, link, to, label
):
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "file").write_text("[theirs]\nkeep = true\n")
    if at.startswith("~"):
        place = Path(env["HOME"]) / at[2:]
        place.unlink()
    else:
        place = proj / at
        place.parent.mkdir(exist_ok=True)
    place.symlink_to(to)

    refused(env, proj, tmp_path, LINKED.format(link=link, to=to, label=label))

    assert (tmp_path / "outside" / "file").read_text() == "[theirs]\nkeep = true\n"
    assert sorted(os.listdir(tmp_path / "outside")) == ["file"]


def test_a_link_planted_at_a_backup_path_is_replaced_and_its_target_untouched(env, proj, tmp_path):
    (proj / ".codex").mkdir()
    (proj / ".codex" / "config.toml").write_text(THEIRS)
    target = tmp_path / "outside"
    target.write_text("precious\n")
    for backup in (backup_of(env, proj, ".codex/config.toml"),
                   Path(env["CODEX_HOME"]) / "config.toml.bak"):  # fmt: skip
        backup.parent.mkdir(parents=True, exist_ok=True)
        backup.symlink_to(target)

    ok(install(env, proj))

    assert target.read_text() == "precious\n"
    assert not backup_of(env, proj, ".codex/config.toml").is_symlink()
    assert backup_of(env, proj, ".codex/config.toml").read_text() == THEIRS
    assert (Path(env["CODEX_HOME"]) / "config.toml.bak").read_text() == USERS


NOT_READ = {
    "not TOML": (
        b"[broken\n",
        "~/.codex/config.toml is not valid TOML (Expected ']' at the end of a table "
        "declaration (at line 1, column 8));" + KEPT,
    ),
    "projects a string": (
        b'projects = "x"\n',
        "~/.codex/config.toml: projects is not a table, so it is not in the shape Codex reads;"
        + KEPT,
    ),
    "the project's entry a string": (
        b'[projects]\n"ROOT" = "trusted"\n',
        '~/.codex/config.toml: projects."ROOT" is not a table, so it is not in the shape '
        "Codex reads;" + KEPT,
    ),
    "hooks.state a number": (
        b"[hooks]\nstate = 3\n",
        "~/.codex/config.toml: hooks.state is not a table, so it is not in the shape Codex "
        "reads;" + KEPT,
    ),
    "untrusted": (
        b'[projects."ROOT"]\ntrust_level = "untrusted"\n',
        "~/.codex/config.toml marks ROOT as 'untrusted' for Codex, so Codex would not read "
        "the project's .codex/ files: trust the project in Codex (or remove that entry) and "
        "run install again (nothing was changed)",
    ),
    "projects an inline table": (
        b'projects = { "/elsewhere" = { trust_level = "trusted" } }\n',
        "~/.codex/config.toml defines projects.ROOT, "
        + ", ".join(
            f"hooks.state.ROOT/.codex/hooks.json:{event}:0:0"
            for event in (
                "session_start",
                "user_prompt_submit",
                "pre_tool_use",
                "stop",
                "session_end",
            )
        )
        + " in a way salon does not edit (an inline table or dotted keys, or a table split "
        "in parts);" + KEPT,
    ),
    "not UTF-8": (
        b'model = "\xff\xfe"\n',
        "~/.codex/config.toml is not UTF-8 text; nothing was changed",
    ),
    "nested 100000 deep": (
        b"a = " + b"[" * 100_000 + b"]" * 100_000 + b"\n",
        "~/.codex/config.toml is nested too deeply to be read;" + KEPT,
    ),
}


@pytest.mark.parametrize("case", NOT_READ)
def test_a_user_config_codex_would_not_read_is_refused_and_nothing_changes(
    env, proj, tmp_path, case
):
    raw, message = NOT_READ[case]
    (Path(env["CODEX_HOME"]) / "config.toml").write_bytes(raw.replace(b"ROOT", bytes(proj)))

    refused(env, proj, tmp_path, message.replace("ROOT", str(proj)))


def test_a_user_config_of_megabytes_is_edited_and_given_back_byte_for_byte(env, proj):
    config = Path(env["CODEX_HOME"]) / "config.toml"
    big = (USERS + 'notes = """' + "x" * 2_000_000 + '"""\n' + "# c\n" * 20_000).encode()
    config.write_bytes(big)

    ok(install(env, proj))
    assert config.read_bytes().startswith(big)
    assert (
        tomledit.loads(config.read_text(), "u")["projects"][str(proj)]["trust_level"] == "trusted"
    )
    ok(run_salon("uninstall", "--client", "codex", env=env, cwd=proj))
    assert config.read_bytes() == big


PROJECT_NOT_READ = {
    "hooks.json a list": (
        "hooks.json", "[1]", ".codex/hooks.json is not a JSON object;" + KEPT
    ),
    "hooks a list": (
        "hooks.json", '{"hooks": []}', '.codex/hooks.json: "hooks" is not an object;' + KEPT
    ),
    "an event an object": (
        "hooks.json", '{"hooks": {"Stop": {}}}',
        '.codex/hooks.json: "hooks.Stop" is not a list;' + KEPT,
    ),
    "a group's hooks an object": (
        "hooks.json", '{"hooks": {"Stop": [{"hooks": {}}]}}',
        '.codex/hooks.json: "hooks.Stop[0].hooks" is not a list;' + KEPT,
    ),
    "a key Codex does not read": (
        "hooks.json", '{"hooks": {}, "x": 1}',
        ".codex/hooks.json holds keys Codex does not read (x): Codex ignores a hooks file "
        "with unknown keys;" + KEPT,
    ),
    "hooks.json nested 100000 deep": (
        "hooks.json", "[" * 100_000 + "]" * 100_000,
        ".codex/hooks.json is not valid JSON (nested more than 512 levels deep); it was left "
        "untouched and nothing was changed — fix the file (or move it away) and run the "
        "command again",
    ),
    "mcp_servers a string": (
        "config.toml", 'mcp_servers = "x"\n',
        ".codex/config.toml defines mcp_servers.salon in a way salon does not edit (an inline "
        "table or dotted keys, or a table split in parts);" + KEPT,
    ),
    "config.toml not TOML": (
        "config.toml", "[broken\n",
        ".codex/config.toml is not valid TOML (Expected ']' at the end of a table declaration "
        "(at line 1, column 8));" + KEPT,
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", PROJECT_NOT_READ)
def test_a_project_file_codex_would_not_read_is_refused_and_nothing_changes(
    env, proj, tmp_path, case
):
    name, text, message = PROJECT_NOT_READ[case]
    (proj / ".codex").mkdir()
    (proj / ".codex" / name).write_text(text)

    refused(env, proj, tmp_path, message)


@pytest.mark.parametrize("plain", ["~/.codex", "the data directory", ".git/info"])
def test_a_folder_that_is_a_plain_file_is_refused_before_anything_is_written(
    env, proj, tmp_path, plain
):
    (proj / ".codex").mkdir()
    (proj / ".codex" / "config.toml").write_text(THEIRS)  # backed up: the data directory
    folder, label = {
        "~/.codex": (Path(env["CODEX_HOME"]), "~/.codex/config.toml (Codex user config)"),
        "the data directory": (Path(env["XDG_DATA_HOME"]) / "agent-salon", ".codex/config.toml"),
        ".git/info": (proj / ".git" / "info", ".git/info/exclude"),
    }[plain]
    if folder.exists():
        shutil.rmtree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.write_text("a file\n")

    refused(env, proj, tmp_path,
            f"cannot write {label}: {folder} is not a folder salon can write in; nothing was "
            "changed")  # fmt: skip


QUOTED = "we b'a$x\"y\\z\nnl"  # a space, quotes, a dollar, a backslash, a newline


def test_a_path_that_needs_quoting_gets_valid_files_and_hooks_that_run(env, tmp_path):
    proj = tmp_path / QUOTED
    proj.mkdir()
    subprocess.run(["git", "init", "-q", str(proj)], check=True)
    store = proj / "st ore$'\".db"
    shutil.copyfile(env["AGENT_SALON_DB"], store)
    store.chmod(0o600)
    env = dict(env, AGENT_SALON_NAME="web", AGENT_SALON_DB=str(store))
    status = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=proj,
                            capture_output=True, check=True).stdout  # fmt: skip

    ok(install(env, proj))

    config = tomledit.loads((proj / ".codex" / "config.toml").read_text(), "c")
    assert config["mcp_servers"]["salon"]["env"]["AGENT_SALON_NAME"] == "web"
    user = tomledit.loads(user_config(env), "u")
    assert user["projects"][str(proj)] == {"trust_level": "trusted"}
    assert f"{proj}/.codex/hooks.json:session_start:0:0" in user["hooks"]["state"]
    hooks = json.loads((proj / ".codex" / "hooks.json").read_text())["hooks"]
    command = hooks["SessionStart"][0]["hooks"][0]["command"]
    bare = {k: v for k, v in env.items() if not k.startswith("AGENT_SALON_")}
    payload = {"session_id": SESSION, "cwd": str(proj), "transcript_path": None,
               "source": "startup"}  # fmt: skip
    ran = subprocess.run(["bash", "-c", command], cwd=proj, env=bare, capture_output=True,
                         text=True, input=json.dumps(payload), timeout=60)  # fmt: skip
    said = hook_json(ran)["hookSpecificOutput"]["additionalContext"]
    assert f"this session is web#{SESSION[:8]} on the bus" in said
    assert ok(install(env, proj)).stdout.count("unchanged") == 3

    ok(run_salon("uninstall", "--client", "codex", env=env, cwd=proj))
    assert user_config(env) == USERS
    after = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=proj,
                           capture_output=True, check=True).stdout  # fmt: skip
    assert after.replace(b"?? .agent-salon-secret\n", b"") == status.replace(
        b"?? .agent-salon-secret\n", b""
    )


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        ("~/.codex/config.toml", b"[broken\n", NOT_READ["not TOML"][1]),
        (".codex/config.toml", b'mcp_servers = "x"\n',
         ".codex/config.toml: mcp_servers is not a table, so it is not in the shape Codex "
         "reads;" + KEPT),
    ],
)  # fmt: skip
def test_uninstall_refuses_a_file_codex_would_not_read_and_changes_nothing(
    env, proj, tmp_path, name, raw, message
):
    path = Path(env["HOME"]) / name[2:] if name.startswith("~") else proj / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(raw)
    before = tree(tmp_path)

    done = run_salon("uninstall", "--client", "codex", env=env, cwd=proj)

    assert (done.returncode, done.stderr) == (1, f"salon uninstall: {message}\n")
    assert tree(tmp_path) == before
