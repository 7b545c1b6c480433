"""Django settings for agent-salon, read from the environment (then AGENT_SALON_CONFIG).

Every variable is listed in salon/config.py and in the README. A malformed value stops
start-up with ImproperlyConfigured naming the variable; an unknown AGENT_SALON_*
variable is named in a warning on stderr.

django-environ parses the two URLs (DATABASE_URL, REDIS_URL). The scalar values go
through salon.config.Settings instead of environ.Env's casts on purpose: Env treats a
value starting with `$` as a reference to another variable (a secret such as `$3cr…`
would be looked up, not used), and its int()/bool casts fail without naming the
variable or accept anything; Settings refuses a bad value naming it.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from bus.sqliteopen import SQLITE_BEGIN, SQLITE_PRAGMAS, SQLITE_TIMEOUT
from salon.config import ConfigError, Settings, merged_environment, read, settings_key, warn_unknown
from salon.store import (
    DB_NAME,
    default_data_dir,
    fingerprint,
    is_default,
    locate,
    read_secret,
)

BASE_DIR = Path(__file__).resolve().parent.parent

# The write lock taken at BEGIN and waited for, WAL, fsync at commit (bus.sqliteopen).
SQLITE_OPTIONS = {
    "transaction_mode": SQLITE_BEGIN,
    "timeout": SQLITE_TIMEOUT,
    "init_command": "".join(f"PRAGMA {pragma};" for pragma in SQLITE_PRAGMAS),
}


def _shown_url(url: str) -> str:
    """The URL for an error message, with its password masked."""
    try:
        parts = urlsplit(url)
        if parts.password:
            netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
            return parts._replace(netloc=netloc).geturl()
    except ValueError:
        pass
    return url


def _database(url: str, sqlite_path: Path) -> dict:
    if not url:
        return {
            # Django's SQLite backend, each statement's placeholders converted once.
            "ENGINE": "salon.sqlite",
            "NAME": str(sqlite_path),
            "OPTIONS": dict(SQLITE_OPTIONS),
            # Opening SQLite runs the PRAGMAs above: keep connections open (each thread
            # has its own), rather than one open per request or per consumer DB call.
            "CONN_MAX_AGE": None,
            # A file (concurrency tests need real locking, not shared-cache memory), one
            # per test process, so that parallel test runs never share it.
            "TEST": {"NAME": str(Path(tempfile.gettempdir()) / f"salon-test-{os.getpid()}.db")},
        }
    import environ  # only for a URL: the embedded default starts faster without it

    hint = "use e.g. postgres://user:password@host:5432/name"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # django-environ warns, then returns an empty engine
        try:
            config = environ.Env.db_url_config(url)
        except Exception as exc:  # django-environ raises several types for a bad URL
            raise ConfigError(
                f"DATABASE_URL={_shown_url(url)!r} is not a database URL ({exc}); {hint}"
            ) from None
    engine = config.get("ENGINE", "")
    if engine not in ("django.db.backends.postgresql", "django.contrib.gis.db.backends.postgis"):
        named = engine.rsplit(".", 1)[-1] or "none"
        raise ConfigError(
            f"DATABASE_URL={_shown_url(url)!r} names a database agent-salon does not run on "
            f"({named}); {hint} (PostgreSQL), or leave it unset for the embedded SQLite store"
        )
    # Channels closes connections around every database_sync_to_async call when they are
    # older than CONN_MAX_AGE: with 0, a stream's every push would reconnect.
    config.setdefault("CONN_MAX_AGE", 300)
    config.setdefault("CONN_HEALTH_CHECKS", True)
    if config["ENGINE"] == "django.db.backends.sqlite3" and config.get("NAME") != ":memory:":
        config["OPTIONS"] = {**SQLITE_OPTIONS, **config.get("OPTIONS", {})}
    return config


def _channel_layer(url: str, store: str) -> dict:
    """The channel layer: in-process, or Redis with every key under this store's
    fingerprint, so that two stores sharing one Redis never hear each other's groups
    (seat.<id> is seat 1 of every store: one store's new stream would end another's)."""
    if not url:
        # channels' in-memory layer, with its expiry sweep run at most once a second.
        return {"BACKEND": "patches.channels.SweepingInMemoryChannelLayer"}
    try:
        scheme, host = urlsplit(url).scheme, urlsplit(url).hostname
    except ValueError:
        scheme, host = "", None
    if scheme not in ("redis", "rediss") or not host:
        raise ConfigError(
            f"REDIS_URL={_shown_url(url)!r} is not a Redis URL; use e.g. "
            "redis://127.0.0.1:6379/0 (rediss:// for TLS)"
        )
    import environ

    config = environ.Env.channels_url_config(url)
    # channels_redis waits for a message with a 5 s blocking pop; redis-py 8 gives every
    # read a 5 s socket timeout by default, which cut those waits ("Timeout reading").
    config["CONFIG"]["hosts"] = [
        {"address": address, "socket_timeout": 30, "socket_connect_timeout": 5}
        for address in config["CONFIG"]["hosts"]
    ]
    config["CONFIG"]["prefix"] = f"salon.{store}"
    # channels_redis's layer loses a message when a consumer ends at the wrong moment;
    # this one does not (patches.channels_redis).
    config["BACKEND"] = "patches.channels_redis.CancelSafeRedisChannelLayer"
    return config


try:
    _values = merged_environment()
    warn_unknown(_values)
    _read = read(_values)
    PORT, BIND = _read.port, _read.bind
    LONG_CHARS, INBOX_CHARS = _read.long_chars, _read.inbox_chars
    # The stats ledger's retention in days, enforced by `salon prune` (bus.stats).
    STATS_DAYS = _read.stats_days
    REQUIRE_TOKENS, DEBUG = _read.require_tokens, _read.debug
    # Who besides this user may reach the TCP port from this machine, and how a
    # connection's owner is read (salon.gate, salond.peers).
    PEERS, PEER_LOOKUP = _read.peers, _read.peer_lookup
    MCP_ALLOWED_HOSTS = _read.allowed_hosts
    DEFAULT_ROOM, AGENT_NAME, AGENT_ROOMS = _read.default_room, _read.agent_name, _read.agent_rooms
    # "" = decide from the hook input and the terminal; "1"/"0" force it.
    HEADLESS = _read.headless
    # Who sits in this process's seats (AGENT_SALON_CLIENT; "" = not said).
    CLIENT = _read.client
    ALIASES, SESSION_IDLE = _read.aliases, _read.session_idle
    # Slow and piled-up connections (salon.serving).
    HEADER_TIMEOUT, BODY_TIMEOUT = _read.header_timeout, _read.body_timeout
    CONNECTIONS_PER_ADDRESS = _read.connections_per_address
    # Relay mode (relay/server.py): on only when the secret is set.
    RELAY_SECRET = _read.relay_secret
    RELAY_RETENTION_HOURS = _read.relay_retention_hours
    RELAY_MAX_ENTRY_BYTES, RELAY_RATE = _read.relay_max_entry_bytes, _read.relay_rate
    RELAY_ROOM_ENTRIES, RELAY_ROOM_BYTES = _read.relay_room_entries, _read.relay_room_bytes
    RELAY_DEVICE_TTL_DAYS = _read.relay_device_ttl_days
    # The letterbox and the safety net (bus.services.triage): off without a command.
    TRIAGE_CMD, TRIAGE_TIMEOUT = _read.triage_cmd, _read.triage_timeout
    TRIAGE_LETTERBOX, TRIAGE_NET = _read.triage_letterbox, _read.triage_net
    # Seconds a policy's serve command may run for a request (relay.runner).
    SERVE_TIMEOUT = _read.serve_timeout
    _cfg = Settings(_values)
    _where = locate(_values)
    DB_PATH = Path(_where.db_path or os.path.join(_where.data_dir, DB_NAME))
    # The store as salon.store names it for a command's local line (salond.line): a
    # server keys its line by this same string.
    STORE = _where.store
    DATABASE_URL = _cfg.text("DATABASE_URL")
    REDIS_URL = _cfg.text("REDIS_URL")
    DATABASES = {"default": _database(DATABASE_URL, DB_PATH)}
    # A running server answers a command's request only if the command's settings have
    # the same key (salond.line).
    SETTINGS_KEY = settings_key(_values)
    # How /healthz names this store (salon.store.fingerprint), and whether it is the
    # default one, which a command line needs nothing to find (`salon install`).
    STORE_FINGERPRINT = fingerprint(DATABASE_URL or os.path.realpath(DB_PATH))
    CHANNEL_LAYERS = {"default": _channel_layer(REDIS_URL, STORE_FINGERPRINT)}
    # This user's data directory whatever the store (`salon install --plugin` keeps the
    # plugin there).
    USER_DATA_DIR = Path(default_data_dir())
    DEFAULT_STORE = is_default(_values, _where)
except ConfigError as exc:
    raise ImproperlyConfigured(str(exc)) from None


# Where the store's data directory and secret are: salon.store (which also creates them,
# before settings are read: salon/cli.py, manage.py). Reading settings writes nothing.
DATA_DIR = Path(_where.data_dir)
SALON_SECRET = read_secret(_values)
SECRET_KEY = "django-" + SALON_SECRET
# Staff sessions live in their signed cookie, not in the store: nothing read from the
# database opens the admin (the cookie is signed with the secret, a file of its own). The
# cookie carries the user's login key, which logging out replaces (salon.sessions).
SESSION_ENGINE = "salon.sessions"

# Host and Origin are checked against MCP_ALLOWED_HOSTS (AGENT_SALON_ALLOWED_HOSTS) by the
# /mcp consumer and, for every other path, by salon.middleware (first in MIDDLEWARE), with
# a clean 403 instead of Django's DisallowedHost and its traceback per request.
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = [
    # First: its `runserver` (daphne's, with the open-bind warning) wins over daphne's own.
    "salon",
    "daphne",
    "salon.apps.AdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_filters",
    "channels",
    "bus",
    "mcpgate",
    "relay",
]

# The lean app set of the bus commands hooks and cron run on every turn (`salon send`,
# `inbox`, `agents` …: bus.management.verbs), of `salon mcp`, and of the commands in
# salon.cli.LEAN_COMMANDS (`salon wait`, `uninstall`). Loading daphne (twisted,
# autobahn, OpenSSL), the admin and auth costs those commands most of their start-up
# time, and they only touch bus rows through bus.services. The project's own apps all
# stay (a model that points at a seat must be seen when `prune` deletes the seat;
# tests/test_cli.py checks it). Chosen per command by salon/cli.py, never by a
# setting: `serve`, `migrate`, `makemigrations`, `createsuperuser`, `check`, `shell`
# and every other command keep INSTALLED_APPS, so a migration never runs without them.
NOT_FOR_CLI = {
    "salon",  # the daemon's metrics: a command's would die with it
    "daphne",  # the ASGI server
    "channels",  # the channel layer is reached through channels.layers, app or not
    "django_filters",  # the admin's history filters
    "salon.apps.AdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
}
CLI_APPS = [app for app in INSTALLED_APPS if app not in NOT_FOR_CLI]

MIDDLEWARE = [
    "salon.middleware.HostOriginMiddleware",  # first: nothing below sees a refused request
    "salon.metrics.RequestTimingMiddleware",  # times everything below it
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "salon.urls"
ASGI_APPLICATION = "salon.asgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # The project's templates (the admin's overrides, the staff pages): the top-level
        # templates/ of a checkout, installed as salon/templates by `pip install .`.
        "DIRS": [
            path
            for path in (BASE_DIR / "templates", Path(__file__).resolve().parent / "templates")
            if path.is_dir()
        ][:1],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
LANGUAGE_CODE = "en-us"
USE_I18N = False
STATIC_URL = "/static/"
LOGIN_URL = "/admin/login/"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {
        "salon": {"handlers": ["stderr"], "level": "INFO"},
        "django.request": {"handlers": ["stderr"], "level": "ERROR"},
    },
}
