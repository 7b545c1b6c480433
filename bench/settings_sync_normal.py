"""salon.settings with SQLite `PRAGMA synchronous=NORMAL` instead of FULL.

For the throughput comparison only (bench/throughput.py): the product ships FULL. Used
as DJANGO_SETTINGS_MODULE=bench.settings_sync_normal by the daemon and the CLI.
"""

from salon.settings import *  # noqa: F403
from salon.settings import DATABASES

_options = DATABASES["default"].get("OPTIONS", {})
if "init_command" in _options:
    _options["init_command"] = _options["init_command"].replace(
        "synchronous=FULL", "synchronous=NORMAL"
    )
    assert "synchronous=NORMAL" in _options["init_command"]
