"""`salon relay sync` as a cron job runs it: the installed `salon` command (this
installation's entry point, not the checkout on PYTHONPATH), against a real relay, for
each of its exit codes — 0 synced, 3 entries still wait for the relay's rate window,
1 the relay could not be reached."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support import (
    Daemon,
    drop_store,
    migrate,
    query_store,
    run_django_script,
    run_salon,
    salon_env,
    stretched,
)
from tests.test_relay import SECRET

INSTALLED = Path(sys.executable).with_name("salon")
RATE = 10  # entries a minute the relay takes from one device

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not INSTALLED.exists(), reason=f"no installed `salon` at {INSTALLED}"),
]

# Entries written on the machine while nothing carries them (no daemon runs there).
WRITE = """
import django
django.setup()
from bus import services
seat = services.seats.check_in(agent="ops", session_id="c0c0c0c0-0000-4000-8000-000000000001")
services.rooms.join_room(seat=seat, room="team")
for n in range({count}):
    services.entries.send_entry(seat=seat, room="team", text="nightly {tag} %d" % n)
"""


def installed_salon(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """The installed `salon`, importing the installed package: no PYTHONPATH to the checkout."""
    clean = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [str(INSTALLED), *args], env=clean, cwd=cwd, capture_output=True, text=True,
        timeout=stretched(120),
    )  # fmt: skip


def test_the_installed_salon_relay_sync_exits_0_when_synced_3_while_entries_wait_1_when_unreachable(
    tmp_path,
):
    tmp = tempfile.mkdtemp(prefix="rs-", dir="/tmp")
    relay_dir, cron_dir = tmp_path / "relay", tmp_path / "cron"
    relay_dir.mkdir()
    cron_dir.mkdir()
    relay_env = salon_env(relay_dir, TMPDIR=tmp, AGENT_SALON_RELAY_SECRET=SECRET,
                          AGENT_SALON_RELAY_RATE=str(RATE))  # fmt: skip
    cron = salon_env(cron_dir, TMPDIR=tmp)
    relay = Daemon(env=relay_env, cwd=relay_dir, command=("relay", "serve"))
    try:
        for env in (relay_env, cron):
            migrate(env)
        relay.start(90)
        used = run_salon("relay", "use", relay.url, "--secret", SECRET, "--device", "cron",
                         env=cron, cwd=cron_dir)  # fmt: skip
        assert used.returncode == 0, used.stderr
        assert run_salon("rooms", "--create", "team", env=cron, cwd=cron_dir).returncode == 0
        invited = run_salon("invite", "team", "--for", "laptop", env=cron, cwd=cron_dir)
        assert invited.returncode == 0, invited.stderr  # the room is bridged here too

        def pushed() -> int:
            return len(query_store(relay_env, "SELECT 1 FROM relay_relayenvelope "
                                              "WHERE sender NOT LIKE '@%'"))  # fmt: skip

        run_django_script(cron, WRITE.format(count=1, tag="a"), cron_dir)
        synced = installed_salon("relay", "sync", env=cron, cwd=cron_dir)
        assert (synced.returncode, synced.stderr) == (0, "")
        assert synced.stdout.strip() == "team: 1 sent, 0 received"
        assert pushed() == 1

        run_django_script(cron, WRITE.format(count=2 * RATE, tag="b"), cron_dir)
        paced = installed_salon("relay", "sync", env=cron, cwd=cron_dir)
        assert paced.returncode == 3, paced.stdout + paced.stderr
        assert "still waiting (the relay's rate)" in paced.stdout
        assert "run `salon relay sync` again in a minute" in paced.stderr
        assert 1 < pushed() < 1 + 2 * RATE  # what the window took went; the rest waits

        relay.stop()
        unreachable = installed_salon("relay", "sync", env=cron, cwd=cron_dir)
        assert unreachable.returncode == 1, unreachable.stdout + unreachable.stderr
        assert "1 of 1 room(s) did not sync: team:" in unreachable.stderr
        assert "Traceback" not in unreachable.stderr
    finally:
        relay.stop()
        for env in (relay_env, cron):
            drop_store(env)
        shutil.rmtree(tmp, ignore_errors=True)
