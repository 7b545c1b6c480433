"""The first hour on default settings: a new user, two projects, no variable set.

Every test here runs the real `salon` with a temporary HOME and no AGENT_SALON_*,
DATABASE_URL or REDIS_URL in its environment, from project directories of its own: what
someone who just installed agent-salon gets.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO

DATA = Path(".local/share/agent-salon")
WEB_SESSION = "3f9c1a20-5b7e-4c1d-9a2f-0e1d2c3b4a51"
API_SESSION = "c4e1b7d2-8a9f-4e3d-b2c1-a0f9e8d7c6b5"


@pytest.fixture
def home(tmp_path, short_tmp):
    """A new user's HOME, with two projects in it; nothing of agent-salon's set."""
    home = tmp_path / "home"
    for project in ("web-app", "api-service"):
        (home / "code" / project).mkdir(parents=True)
    return home


def salon(home: Path, project: str, *args: str, session: str | None = None, tmp: str = "", **extra):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AGENT_SALON_", "CLAUDE_CODE_", "DJANGO_", "XDG_"))
        and k not in ("DATABASE_URL", "REDIS_URL", "PYTHONPATH")
    }
    env.update(HOME=str(home), PYTHONPATH=str(REPO), **extra)
    if tmp:
        env["TMPDIR"] = tmp
    if session:
        env["CLAUDE_CODE_SESSION_ID"] = session
    return subprocess.run(
        [sys.executable, "-m", "salon.cli", *args],
        cwd=home / "code" / project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout


def test_two_projects_set_up_with_nothing_configured_meet_and_talk(home, short_tmp):
    """REGRESSION: 2026-12-01 — each project got its own ./agent-salon.db: two projects
    set up as the README says never met, and `join` in the second one said the database
    had no tables."""
    ok(salon(home, "web-app", "join", "team", "--create", session=WEB_SESSION, tmp=short_tmp))
    ok(salon(home, "api-service", "join", "team", session=API_SESSION, tmp=short_tmp))

    asked = ok(
        salon(
            home,
            "web-app",
            "send",
            "team",
            "QUESTION",
            "Which port does staging listen on?",
            "--to",
            "api-service",
            "--json",
            session=WEB_SESSION,
            tmp=short_tmp,
        )
    )
    inbox = json.loads(
        ok(salon(home, "api-service", "inbox", "--json", session=API_SESSION, tmp=short_tmp))
    )

    assert json.loads(asked)["wakes"] == ["api-service#c4e1b7d2"]
    [entry] = inbox["entries"]
    assert (entry["from"], entry["type"], entry["room"], entry["wakes"]) == (
        "web-app#3f9c1a20",
        "QUESTION",
        "team",
        True,
    )


def test_the_shared_store_and_its_secret_are_private_files_in_the_users_data_directory(
    home, short_tmp
):
    ok(salon(home, "web-app", "rooms", tmp=short_tmp))
    data = home / DATA

    modes = {
        path.name: stat.S_IMODE(path.stat().st_mode)
        for path in [data, *data.iterdir()]
        if path.name in ("agent-salon", "salon.db", "salon.db-wal", "salon.db-shm")
        or path.name == ".agent-salon-secret"
    }

    assert modes["agent-salon"] == 0o700
    assert modes["salon.db"] == 0o600
    assert modes[".agent-salon-secret"] == 0o600
    assert all(mode == 0o600 for name, mode in modes.items() if name.startswith("salon.db"))


def test_salon_where_names_the_store_the_secret_and_the_data_directory(home, short_tmp):
    ok(salon(home, "web-app", "rooms", tmp=short_tmp))

    found = json.loads(ok(salon(home, "api-service", "where", "--json", tmp=short_tmp)))

    data = home / DATA
    assert found == {
        "store": str(data / "salon.db"),
        "engine": "sqlite",
        "secret": str(data / ".agent-salon-secret"),
        "dataDir": str(data),
        "servers": [],
        "stdio": [],
        "otherSettings": [],
    }


def test_a_join_by_a_new_seat_puts_it_in_that_room_only(home, short_tmp):
    """REGRESSION: 2026-12-01 — `salon join team` from a new seat also put it in the
    default room `salon`."""
    ok(salon(home, "web-app", "rooms", "--create", "team", tmp=short_tmp))

    ok(salon(home, "web-app", "join", "team", session=WEB_SESSION, tmp=short_tmp))

    agents = json.loads(ok(salon(home, "web-app", "agents", "--json", tmp=short_tmp)))
    [agent] = agents["agents"]
    assert agent["rooms"] == ["team"]


def test_a_relative_store_path_is_refused_in_one_line(home, short_tmp):
    done = salon(home, "web-app", "rooms", tmp=short_tmp, AGENT_SALON_DB="./mine.db")

    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "AGENT_SALON_DB='./mine.db' is a relative path" in done.stderr
    assert not (home / "code" / "web-app" / "mine.db").exists()


def test_a_store_others_can_read_is_refused_naming_the_file_and_the_fix(home, short_tmp):
    ok(salon(home, "web-app", "rooms", tmp=short_tmp))
    db = home / DATA / "salon.db"
    db.chmod(0o644)

    done = salon(home, "web-app", "rooms", tmp=short_tmp)

    assert done.returncode == 2
    assert f"chmod 600 {db}" in done.stderr
    assert done.stderr.count("\n") == 1


def test_a_missing_secret_is_never_replaced_while_the_store_holds_entries(home, short_tmp):
    ok(salon(home, "web-app", "send", "salon", "FACT", "kept.", tmp=short_tmp))
    secret = home / DATA / ".agent-salon-secret"
    secret.unlink()

    done = salon(home, "web-app", "history", "salon", tmp=short_tmp)

    assert done.returncode == 2
    assert f"expected at {secret}" in done.stderr
    assert not secret.exists()


def test_a_backup_holds_the_store_and_its_secret_and_reads_back_untampered(home, short_tmp):
    ok(
        salon(
            home,
            "web-app",
            "send",
            "salon",
            "FACT",
            "worth keeping.",
            session=WEB_SESSION,
            tmp=short_tmp,
        )
    )
    target = home / "backup"

    ok(salon(home, "web-app", "backup", str(target), tmp=short_tmp))
    restored = salon(
        home,
        "web-app",
        "history",
        "salon",
        "--json",
        session=WEB_SESSION,
        tmp=short_tmp,
        AGENT_SALON_DB=str(target / "salon.db"),
    )

    history = json.loads(ok(restored))
    assert [(e["content"], e["tampered"]) for e in history["entries"]] == [
        ("worth keeping.", False)
    ]
    assert stat.S_IMODE((target / ".agent-salon-secret").stat().st_mode) == 0o600


def test_a_backup_also_copies_this_machines_relay_keys_privately(home, short_tmp):
    ok(salon(home, "web-app", "rooms", tmp=short_tmp))  # the store and its directory exist
    keys = home / DATA / "relay-keys.json"
    keys.write_text('{"relay": "https://relay.example", "rooms": {}}')
    keys.chmod(0o600)
    target = home / "backup"

    ok(salon(home, "web-app", "backup", str(target), tmp=short_tmp))

    assert (target / "relay-keys.json").read_text() == keys.read_text()
    assert stat.S_IMODE((target / "relay-keys.json").stat().st_mode) == 0o600
