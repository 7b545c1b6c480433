"""The settings of the test processes themselves (pytest-django): agent-salon's own, with
the store located in a directory of the test run's, never in the user's data directory.

The processes the tests start get their own environment (tests/support.salon_env)."""

import atexit
import os
import shutil
import tempfile

if not os.environ.get("AGENT_SALON_DB"):
    _data = tempfile.mkdtemp(prefix="salon-tests-")
    atexit.register(shutil.rmtree, _data, ignore_errors=True)
    os.environ["AGENT_SALON_DB"] = os.path.join(_data, "salon.db")

from salon import config, store

store.prepare(config.merged_environment())

from salon.settings import *  # noqa: E402, F403
