from __future__ import annotations

import pytest

from tests.support import Daemon, drop_abandoned_stores, drop_store, migrate, salon_env


def pytest_sessionstart(session):
    drop_abandoned_stores()


@pytest.fixture
def env(tmp_path):
    """Environment for real `salon` processes sharing one fresh store (see salon_env)."""
    environment = salon_env(tmp_path)
    migrate(environment)
    yield environment
    drop_store(environment)


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
