from __future__ import annotations

import pytest

from tests.support import Daemon, drop_abandoned_stores, drop_store, migrate, salon_env


def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker more than the cores this process may use. Many tests spend
    their time waiting on real processes (a daemon, Claude Code, a browser), so a spare
    worker fills the cores: on 2 cores, 3 workers ran the suite in 7m51s where 2 took
    8m36s. PYTEST_XDIST_AUTO_NUM_WORKERS still decides when it is set."""
    import os

    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    return len(os.sched_getaffinity(0)) + 1


def pytest_sessionstart(session):
    if hasattr(session.config, "workerinput"):
        return  # the controller does this once for every worker
    drop_abandoned_stores()
    compile_source_tree()


def compile_source_tree() -> None:
    """Byte-compile the checkout once, before the workers start.

    The suite starts about a thousand real `salon` processes, which import the project
    from this checkout (PYTHONPATH). Where PYTHONDONTWRITEBYTECODE is set (as on the
    development machines) none of them writes its .pyc, so each compiled every module
    of the project again: ~80 ms of a bus command's 0.32 s of CPU. A .pyc written here
    is only read by them.
    """
    import compileall
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    for package in ("bus", "mcpgate", "relay", "salon", "tests"):
        compileall.compile_dir(root / package, quiet=1)


@pytest.fixture(autouse=True)
def _default_room_as_migrated(request):
    """Every database test starts with the default room its migration makes.

    A transactional test (django_db(transaction=True)) empties every table when it ends,
    that room included. pytest-django runs those after the others, but xdist's work
    stealing can hand a worker one before them, and the tests that meet in the default
    room then found it missing."""
    marker = request.node.get_closest_marker("django_db")
    transactional = bool(marker and marker.kwargs.get("transaction")) or (
        "transactional_db" in request.fixturenames
    )
    if transactional:
        request.getfixturevalue("transactional_db")
    elif marker is not None or "db" in request.fixturenames:
        request.getfixturevalue("db")
    else:
        return
    from django.conf import settings

    from bus.models import Room

    Room.objects.get_or_create(name=settings.DEFAULT_ROOM)


@pytest.fixture
def short_tmp():
    """A TMPDIR of the test's own with a short path: a Unix socket's path (the local line
    lives in $TMPDIR) may not exceed ~100 bytes, and pytest's own tmp_path can."""
    import shutil
    import tempfile

    path = tempfile.mkdtemp(prefix="st-", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def env(tmp_path):
    """Environment for real `salon` processes sharing one fresh store (see salon_env)."""
    environment = salon_env(tmp_path)
    migrate(environment)
    yield environment
    drop_store(environment)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test that ran a daemon shows the daemon's log (CI keeps nothing else)."""
    report = yield
    server = getattr(item, "funcargs", {}).get("daemon")
    if report.when == "call" and report.failed and isinstance(server, Daemon):
        report.sections.append(("daemon log", server.log()[-20000:]))
    return report


@pytest.fixture
def daemon(tmp_path, env):
    """A real `salon serve` (daphne) on a free loopback port, stopped afterwards."""
    server = Daemon(env=env, cwd=tmp_path).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def shared_daemon(tmp_path_factory):
    """One real daemon for a whole module, for tests that each use their own sessions."""
    data = tmp_path_factory.mktemp("shared")
    environment = salon_env(data)
    migrate(environment)
    server = Daemon(env=environment, cwd=data).start()
    yield server
    server.stop()
    drop_store(environment)
