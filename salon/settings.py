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

import ipaddress
import os
import re
import secrets
import tempfile
import warnings
from pathlib import Path
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from bus.rules import RuleError, parse_aliases, parse_duration, validate_name
from salon.config import ConfigError, Settings, merged_environment, warn_unknown

BASE_DIR = Path(__file__).resolve().parent.parent

# Daemon, cron and hooks write at once: take the write lock at BEGIN (IMMEDIATE) and wait
# for it (busy_timeout) instead of failing on a lock upgrade; WAL lets readers go on.
SQLITE_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
    "init_command": "PRAGMA journal_mode=WAL;PRAGMA synchronous=FULL;PRAGMA busy_timeout=20000;",
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


def _bind_address(value: str) -> str:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        pass
    if re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?", value):
        return value  # a host name such as localhost
    raise ConfigError(
        f"AGENT_SALON_BIND={value!r} is not an address to listen on; use an IP address "
        "such as 127.0.0.1 or 0.0.0.0 (the port goes in AGENT_SALON_PORT)"
    )


def _database(url: str, sqlite_path: Path) -> dict:
    if not url:
        return {
            "ENGINE": "django.db.backends.sqlite3",
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
    if "." not in config.get("ENGINE", ""):
        raise ConfigError(
            f"DATABASE_URL={_shown_url(url)!r} names no database engine django-environ "
            f"knows; {hint}"
        )
    # Channels closes connections around every database_sync_to_async call when they are
    # older than CONN_MAX_AGE: with 0, a stream's every push would reconnect.
    config.setdefault("CONN_MAX_AGE", 300)
    config.setdefault("CONN_HEALTH_CHECKS", True)
    if config["ENGINE"] == "django.db.backends.sqlite3" and config.get("NAME") != ":memory:":
        config["OPTIONS"] = {**SQLITE_OPTIONS, **config.get("OPTIONS", {})}
    return config


def _channel_layer(url: str) -> dict:
    if not url:
        # channels' in-memory layer, with its expiry sweep run at most once a second.
        return {"BACKEND": "mcpgate.layers.SweepingInMemoryChannelLayer"}
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

    return environ.Env.channels_url_config(url)


try:
    _values = merged_environment()
    warn_unknown(_values)
    _cfg = Settings(_values)
    PORT = _cfg.port("AGENT_SALON_PORT")
    BIND = _bind_address(_cfg.text("AGENT_SALON_BIND") or "127.0.0.1")
    LONG_CHARS = _cfg.integer("AGENT_SALON_LONG_CHARS", minimum=1)
    INBOX_CHARS = _cfg.integer("AGENT_SALON_INBOX_CHARS")
    # The stats ledger's retention in days, enforced by `salon prune` (bus.stats).
    STATS_DAYS = _cfg.integer("AGENT_SALON_STATS_DAYS", minimum=1, maximum=3650)
    REQUIRE_TOKENS = _cfg.flag("AGENT_SALON_REQUIRE_TOKENS")
    DEBUG = _cfg.flag("AGENT_SALON_DEBUG")
    MCP_ALLOWED_HOSTS = _cfg.items("AGENT_SALON_ALLOWED_HOSTS")
    DEFAULT_ROOM = _cfg.text("AGENT_SALON_DEFAULT_ROOM") or "salon"
    AGENT_NAME = _cfg.text("AGENT_SALON_NAME")
    AGENT_ROOMS = _cfg.items("AGENT_SALON_ROOM")
    # "" = decide from the hook input and the terminal; "1"/"0" force it.
    HEADLESS = {None: "", True: "1", False: "0"}[_cfg.optional_flag("AGENT_SALON_HEADLESS")]
    for _variable, _what, _names in (
        ("AGENT_SALON_DEFAULT_ROOM", "room", [DEFAULT_ROOM]),
        ("AGENT_SALON_ROOM", "room", AGENT_ROOMS),
        ("AGENT_SALON_NAME", "agent", [AGENT_NAME] if AGENT_NAME else []),
    ):
        for _name in _names:
            try:
                validate_name(_name, _what)
            except RuleError as exc:
                raise ConfigError(f"{_variable}: {exc}") from None
    try:
        ALIASES = parse_aliases(_cfg.raw("AGENT_SALON_ALIASES"))
    except RuleError as exc:
        raise ConfigError(f"AGENT_SALON_ALIASES: {exc}") from None
    try:
        SESSION_IDLE = parse_duration(_cfg.text("AGENT_SALON_SESSION_IDLE") or "7d")
    except RuleError as exc:
        raise ConfigError(f"AGENT_SALON_SESSION_IDLE: {exc}") from None
    DB_PATH = Path(_cfg.text("AGENT_SALON_DB") or "./agent-salon.db").expanduser().resolve()
    DATABASE_URL = _cfg.text("DATABASE_URL")
    REDIS_URL = _cfg.text("REDIS_URL")
    DATABASES = {"default": _database(DATABASE_URL, DB_PATH)}
    CHANNEL_LAYERS = {"default": _channel_layer(REDIS_URL)}
except ConfigError as exc:
    raise ImproperlyConfigured(str(exc)) from None


def _data_dir() -> Path:
    """Where the generated secret (and the hooks' log) live.

    Embedded: next to the SQLite file, which every process of that salon names. With
    DATABASE_URL, the SQLite path no longer names anything shared, and a secret beside
    it would differ per working directory (every entry would read as tampered from
    another one): unless AGENT_SALON_DB is given, use one directory per user instead,
    $XDG_DATA_HOME/agent-salon. Several machines must share AGENT_SALON_SECRET.
    """
    if not DATABASE_URL or _cfg.values.get("AGENT_SALON_DB", "").strip():
        return DB_PATH.parent
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base).expanduser() / "agent-salon"


DATA_DIR = _data_dir()


def _load_or_create_secret() -> str:
    """AGENT_SALON_SECRET, else a secret generated once into the data dir (mode 600)."""
    given = _cfg.text("AGENT_SALON_SECRET")
    if given:
        return given
    path = DATA_DIR / ".agent-salon-secret"
    try:
        return path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        pass
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_hex(32)
    # Written whole to a private temporary file, then hard-linked into place: the link
    # fails if the secret exists, so two processes starting at once agree on the first
    # one, and nobody ever reads a created-but-still-empty file (an empty key).
    draft = DATA_DIR / f".agent-salon-secret.{os.getpid()}.{secrets.token_hex(4)}"
    with draft.open("x", encoding="ascii") as fd:
        draft.chmod(0o600)
        fd.write(secret + "\n")
    try:
        os.link(draft, path)
    except FileExistsError:
        secret = path.read_text(encoding="ascii").strip()
    finally:
        draft.unlink()
    return secret


SALON_SECRET = _load_or_create_secret()
SECRET_KEY = "django-" + SALON_SECRET

ALLOWED_HOSTS = ["*"]  # /mcp checks Host/Origin itself against MCP_ALLOWED_HOSTS
INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
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
# `inbox`, `agents` …; the list is salon.cli.LEAN_COMMANDS). Loading daphne (twisted,
# autobahn, OpenSSL), the admin and auth costs those commands most of their start-up
# time, and they only touch bus rows through bus.services. The project's own apps all
# stay (a model that points at a seat must be seen when `prune` deletes the seat;
# tests/test_cli.py checks it). Chosen per command by salon/cli.py, never by a
# setting: `serve`, `migrate`, `makemigrations`, `createsuperuser`, `check`, `shell`
# and every other command keep INSTALLED_APPS, so a migration never runs without them.
NOT_FOR_CLI = {
    "daphne",  # the ASGI server
    "channels",  # the channel layer is reached through channels.layers, app or not
    "django_filters",  # the admin's history filters
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
}
CLI_APPS = [app for app in INSTALLED_APPS if app not in NOT_FOR_CLI]

MIDDLEWARE = [
    "salon.metrics.RequestTimingMiddleware",  # first: times everything below it
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
        "DIRS": [Path(__file__).resolve().parent / "templates"],  # the admin's overrides
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
