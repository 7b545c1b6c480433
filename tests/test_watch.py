"""`salon watch [ROOM]`: the live flow in a terminal, as real processes — the command
itself, `salon send` from other processes, and a daemon where one is running."""

from __future__ import annotations

import shutil
import tempfile

import httpx
import pytest

from tests.claude_kit import API_SEAT, WEB_SEAT, api, send, web
from tests.live_kit import DOCS_SEAT, OLD_SEAT, Watch, seed
from tests.support import Daemon, drop_store, migrate, run_salon, salon_env

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One seeded store for the module (each test looks only at what it sends), with a
    TMPDIR short enough for a daemon's line socket."""
    data = tmp_path_factory.mktemp("watch")
    short = tempfile.mkdtemp(prefix="st-", dir="/tmp")
    environment = salon_env(data, TMPDIR=short)
    migrate(environment)
    seed(environment, data)
    yield environment
    drop_store(environment)
    shutil.rmtree(short, ignore_errors=True)


def test_salon_watch_prints_one_line_per_entry_with_the_seats_it_wakes_until_ctrl_c(store):
    watch = Watch(store)

    send(store, web, "team", "QUESTION", "Who owns\nthe refresh?", "--to", "api-service")
    send(store, api, "team", "FACT", "Staging is down until 14:30. " * 10)
    send(store, api, "ops", "REQUEST", "Rotate the keys, please.")
    lines = watch.next_lines(3)

    assert lines[0].endswith(
        f'team QUESTION {WEB_SEAT} → api-service (wakes {API_SEAT}): "Who owns the refresh?"'
    )
    clipped = ("Staging is down until 14:30. " * 4)[:100]  # the first 100 characters
    assert lines[1].endswith(f'team FACT {API_SEAT}: "{clipped}…"')
    assert lines[2].endswith(f'ops REQUEST {API_SEAT}: "Rotate the keys, please."')
    assert all(line[:8].count(":") == 2 for line in lines)  # HH:MM:SS first
    code, said = watch.interrupt()
    assert code == 0
    assert "Traceback" not in said and said == ""


def test_salon_watch_of_one_room_marks_woken_and_quiet_seats_and_leaves_other_rooms_out(store):
    watch = Watch(store, "team")

    send(store, api, "ops", "FACT", "not for this watch")
    send(store, web, "team", "REQUEST", "Please review the login form.")
    (line,) = watch.next_lines(1)

    assert "ops" not in line
    assert line.endswith(
        # the gone seat apart, as `send` leaves it out: the entry waits for it
        f"team REQUEST {WEB_SEAT} (wakes {API_SEAT}) (waits for {OLD_SEAT}: gone) "
        f"(quiet: {DOCS_SEAT}): "
        '"Please review the login form."'
    )
    assert watch.interrupt()[0] == 0


def test_salon_watch_sees_what_a_running_daemon_stores(store, tmp_path):
    daemon = Daemon(env=store, cwd=tmp_path).start()
    try:
        watch = Watch(store)
        posted = httpx.post(
            daemon.url + "/notify?label=ci",
            json={"content": "nightly build 813 is red", "room": "team", "type": "QUESTION"},
            timeout=10,
        )
        assert posted.status_code == 202, posted.text
        (line,) = watch.next_lines(1)
        assert "team QUESTION ci: " in line or "team QUESTION ci (wakes" in line
        assert line.endswith('"nightly build 813 is red"')
        assert watch.interrupt()[0] == 0
    finally:
        daemon.stop()


def test_salon_watch_refuses_an_unknown_room_in_one_line(store):
    done = run_salon("watch", "tema", env=store, timeout=30)

    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("salon watch: there is no room 'tema' (rooms: ")
