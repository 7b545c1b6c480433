from __future__ import annotations

import pytest

from tests.support import Daemon, migrate, salon_env


@pytest.fixture
def env(tmp_path):
    """Environment for real `salon` processes sharing one fresh SQLite file."""
    environment = salon_env(tmp_path)
    migrate(environment)
    return environment


@pytest.fixture
def daemon(tmp_path, env):
    """A real `salon serve` (daphne) on a free loopback port, stopped afterwards."""
    server = Daemon(env=env, cwd=tmp_path).start()
    yield server
    server.stop()
