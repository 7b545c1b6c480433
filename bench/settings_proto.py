"""salon.settings plus the measured prototypes of bench/proto (see its docstring).

DJANGO_SETTINGS_MODULE=bench.settings_proto, BENCH_PROTO=normal,claim,keepalive,notify.
"""

from bench.proto import enabled
from salon.settings import *  # noqa: F403
from salon.settings import CLI_APPS, DATABASES, INSTALLED_APPS, MIDDLEWARE

INSTALLED_APPS = [*INSTALLED_APPS, "bench.proto.apps.ProtoConfig"]
CLI_APPS = [*CLI_APPS, "bench.proto.apps.ProtoConfig"]

if enabled("normal"):
    _options = DATABASES["default"].get("OPTIONS", {})
    if "init_command" in _options:
        _options["init_command"] = _options["init_command"].replace(
            "synchronous=FULL", "synchronous=NORMAL"
        )

if enabled("notify"):
    MIDDLEWARE = [
        "bench.proto.apps.AsyncRequestTiming" if m.endswith("RequestTimingMiddleware") else m
        for m in MIDDLEWARE
    ]
