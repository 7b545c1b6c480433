"""Django settings for agent-salon, read from the environment (then AGENT_SALON_CONFIG).

Every variable is listed in salon/config.py and in the README. A malformed value stops
start-up with ImproperlyConfigured naming the variable; an unknown AGENT_SALON_*
variable is named in a warning on stderr.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from bus.rules import RuleError, parse_aliases, parse_duration
from salon.config import ConfigError, Settings, merged_environment, warn_unknown

BASE_DIR = Path(__file__).resolve().parent.parent

try:
    _values = merged_environment()
    warn_unknown(_values)
    _cfg = Settings(_values)
    PORT = _cfg.port("AGENT_SALON_PORT")
    BIND = _cfg.text("AGENT_SALON_BIND") or "127.0.0.1"
    LONG_CHARS = _cfg.integer("AGENT_SALON_LONG_CHARS", minimum=1)
    INBOX_CHARS = _cfg.integer("AGENT_SALON_INBOX_CHARS")
    REQUIRE_TOKENS = _cfg.flag("AGENT_SALON_REQUIRE_TOKENS")
    DEBUG = _cfg.flag("AGENT_SALON_DEBUG")
    MCP_ALLOWED_HOSTS = _cfg.items("AGENT_SALON_ALLOWED_HOSTS")
    DEFAULT_ROOM = _cfg.text("AGENT_SALON_DEFAULT_ROOM") or "salon"
    AGENT_NAME = _cfg.text("AGENT_SALON_NAME")
    AGENT_ROOMS = _cfg.items("AGENT_SALON_ROOM")
    HEADLESS = _cfg.text("AGENT_SALON_HEADLESS")
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
except ConfigError as exc:
    raise ImproperlyConfigured(str(exc)) from None

# The data directory holds the generated secret next to the embedded database.
DATA_DIR = DB_PATH.parent


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
    try:
        # O_EXCL: two processes starting at once agree on whichever secret was written first.
        fd = path.open("x", encoding="ascii")
    except FileExistsError:
        return path.read_text(encoding="ascii").strip()
    with fd:
        path.chmod(0o600)
        fd.write(secret + "\n")
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

MIDDLEWARE = [
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
        "DIRS": [BASE_DIR / "templates"],
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

if DATABASE_URL:
    try:
        DATABASES = {"default": environ.Env.db_url_config(DATABASE_URL)}
    except Exception as exc:  # django-environ raises several types for a bad URL
        raise ImproperlyConfigured(f"DATABASE_URL is not a database URL: {exc}") from None
    DATABASES["default"].setdefault("CONN_MAX_AGE", 0)
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(DB_PATH),
            "OPTIONS": {
                # Daemon, cron and hooks write at once: take the write lock at BEGIN
                # and wait for it, instead of failing on a lock upgrade.
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
                "init_command": (
                    "PRAGMA journal_mode=WAL;PRAGMA synchronous=FULL;PRAGMA busy_timeout=20000;"
                ),
            },
            "TEST": {"NAME": str(DATA_DIR / "agent-salon-test.db")},
        }
    }

if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

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
