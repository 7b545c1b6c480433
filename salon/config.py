"""Where agent-salon's settings come from: the environment first, then a KEY=VALUE file.

The file is named by AGENT_SALON_CONFIG. Its rules (README, "The configuration file"):
blank lines and `#` comments are skipped, a line is split at its first `=`, key and
value are trimmed, one pair of surrounding double quotes is stripped, and a line without
`=` or with an empty key is skipped. A variable present in the environment wins over the
file, even when it is set to the empty string.

Values are parsed strictly: a malformed value raises ConfigError naming the
variable, so start-up stops instead of silently falling back to a default.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from types import SimpleNamespace

# difflib and pathlib are imported where used: a Claude Code hook reads its settings
# through this module on every turn, and neither is needed then.

# Every variable agent-salon reads; an AGENT_SALON_* name outside this set is a typo.
KNOWN = {
    "AGENT_SALON_PORT": "9315",
    "AGENT_SALON_BIND": "127.0.0.1",
    "AGENT_SALON_DB": "",  # salon.store: salon.db in the user's data directory
    "AGENT_SALON_ALLOWED_HOSTS": "localhost,127.0.0.1,::1",
    "AGENT_SALON_ALIASES": "",
    "AGENT_SALON_CONFIG": "",
    "AGENT_SALON_SECRET": "",
    "AGENT_SALON_NAME": "",
    "AGENT_SALON_ROOM": "",
    "AGENT_SALON_LONG_CHARS": "1500",
    "AGENT_SALON_INBOX_CHARS": "1200",
    "AGENT_SALON_REQUIRE_TOKENS": "0",
    # other local users let through to the TCP port (salon.gate): user names, uids or
    # @group, comma-separated; and how a connection's owner is read (salond.peers:
    # auto, netlink, proc, or off: nobody's is, so every caller needs a token)
    "AGENT_SALON_PEERS": "",
    "AGENT_SALON_PEER_LOOKUP": "auto",
    "AGENT_SALON_SESSION_IDLE": "7d",
    # seconds a request's head, and then its body, may take to arrive; connections one
    # client address may hold open at once (0: no cap) (salon.serving)
    "AGENT_SALON_HEADER_TIMEOUT": "15",
    "AGENT_SALON_BODY_TIMEOUT": "30",
    "AGENT_SALON_CONNECTIONS_PER_ADDRESS": "256",
    "AGENT_SALON_DEFAULT_ROOM": "salon",
    "AGENT_SALON_HEADLESS": "",
    # who sits in the seats of `salon mcp` and `salon hook` (bus.rules.CLIENTS): set by
    # `salon install --client codex` in what it writes; unset, Claude Code's hooks say claude
    "AGENT_SALON_CLIENT": "",
    # 1 when something already runs `salon wait` for the whole session (the plugin's
    # monitor): the SessionStart context then asks for no Monitor of its own
    "AGENT_SALON_WATCHED": "0",
    # 0 (false, no, off): an edit by a session does not claim its file softly for 30 min
    "AGENT_SALON_AUTOCLAIM": "1",
    "AGENT_SALON_DEBUG": "0",
    # days of stats ledger rows `salon prune` keeps (bus.stats)
    "AGENT_SALON_STATS_DAYS": "30",
    # the letterbox and the safety net (bus.services.triage): the judge command,
    # its timeout in seconds, and an off switch for each half
    "AGENT_SALON_TRIAGE_CMD": "",
    "AGENT_SALON_TRIAGE_TIMEOUT": "10",
    "AGENT_SALON_TRIAGE": "on",
    "AGENT_SALON_SAFETY_NET": "on",
    # cross-project requests: seconds a policy's serve command may run (relay.runner)
    "AGENT_SALON_SERVE_TIMEOUT": "10",
    # relay mode (`salon relay serve`, docs/RELAY.md): the secret is the one required value
    "AGENT_SALON_RELAY_SECRET": "",
    "AGENT_SALON_RELAY_RETENTION_HOURS": "168",
    "AGENT_SALON_RELAY_MAX_ENTRY_BYTES": "131072",
    "AGENT_SALON_RELAY_RATE": "600",
    "AGENT_SALON_RELAY_ROOM_ENTRIES": "100000",
    "AGENT_SALON_RELAY_ROOM_BYTES": "268435456",
    "AGENT_SALON_RELAY_DEVICE_TTL_DAYS": "365",
}

# A relay secret shorter than this is refused: it signs every invite and keys every
# device token's hash.
MIN_RELAY_SECRET_CHARS = 16


# What a caller brings along to a running server: who it is, not how the store behaves.
PER_CALLER = {
    "AGENT_SALON_NAME",
    "AGENT_SALON_ROOM",
    "AGENT_SALON_HEADLESS",
    "AGENT_SALON_CLIENT",
    "AGENT_SALON_WATCHED",
    "AGENT_SALON_AUTOCLAIM",
    "AGENT_SALON_CONFIG",
    "AGENT_SALON_PORT",
    "AGENT_SALON_BIND",
    "AGENT_SALON_DEBUG",
    # how the HTTP server treats its connections, not what the bus answers
    "AGENT_SALON_PEERS",
    "AGENT_SALON_PEER_LOOKUP",
    "AGENT_SALON_HEADER_TIMEOUT",
    "AGENT_SALON_BODY_TIMEOUT",
    "AGENT_SALON_CONNECTIONS_PER_ADDRESS",
}


class ConfigError(Exception):
    """A malformed configuration value; the message names the variable and the fix."""


def parse_config_text(text: str) -> dict[str, str]:
    """Parse the KEY=VALUE file format into a dict (later lines win)."""
    values: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            continue
        if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
            value = value[1:-1]
        values[key] = value
    return values


def read_config_file(path: str) -> dict[str, str]:
    """Read the AGENT_SALON_CONFIG file (UTF-8; a leading byte-order mark is ignored)."""
    from pathlib import Path

    try:
        return parse_config_text(Path(path).expanduser().read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise ConfigError(
            f"AGENT_SALON_CONFIG names {path!r}, which does not exist; "
            "create it or unset AGENT_SALON_CONFIG"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"AGENT_SALON_CONFIG file {path!r} cannot be read: {exc}") from None


def merged_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment, with the config file's values under it (environment wins)."""
    env = dict(os.environ if environ is None else environ)
    path = env.get("AGENT_SALON_CONFIG", "")
    if not path:
        return env
    return {**read_config_file(path), **env}


def settings_key(values: Mapping[str, str]) -> str:
    """A digest of every setting that shapes what the bus answers (all but PER_CALLER):
    a command is answered by a running server only when both hold the same. Two CRC-32s
    (of the text and of it reversed), not a SHA: hashlib loads OpenSSL, ~3 ms of every
    command and hook that a server answers, and this tells apart two settings of one
    user, it guards nothing. The code's version is part of it: a server of another
    version (a daemon left running across an upgrade) does not answer for this code."""
    import zlib

    from salon import __version__

    shaping = sorted(
        (name, values.get(name, "").strip())
        for name in (*KNOWN, "DATABASE_URL", "REDIS_URL")
        if name not in PER_CALLER
    )
    text = repr((__version__, shaping)).encode()
    return f"{zlib.crc32(text):08x}{zlib.crc32(text[::-1]):08x}"


def read(values: Mapping[str, str]) -> SimpleNamespace:
    """Every scalar setting, parsed strictly (ConfigError names the variable).

    Django-free, so a command checks its settings before it asks a running server: a
    malformed value is refused everywhere, never half-honoured.
    """
    from bus.rules import CLIENTS, RuleError, parse_aliases, parse_duration, validate_name

    cfg = Settings(values)
    headless = cfg.optional_flag("AGENT_SALON_HEADLESS")
    result = SimpleNamespace(
        port=cfg.port("AGENT_SALON_PORT"),
        bind=_bind_address(cfg.text("AGENT_SALON_BIND") or "127.0.0.1"),
        long_chars=cfg.integer("AGENT_SALON_LONG_CHARS", minimum=1),
        inbox_chars=cfg.integer("AGENT_SALON_INBOX_CHARS"),
        stats_days=cfg.integer("AGENT_SALON_STATS_DAYS", minimum=1, maximum=3650),
        require_tokens=cfg.flag("AGENT_SALON_REQUIRE_TOKENS"),
        peers=_peers(cfg.items("AGENT_SALON_PEERS")),
        peer_lookup=_peer_lookup(cfg.text("AGENT_SALON_PEER_LOOKUP") or "auto"),
        debug=cfg.flag("AGENT_SALON_DEBUG"),
        allowed_hosts=cfg.items("AGENT_SALON_ALLOWED_HOSTS"),
        default_room=cfg.text("AGENT_SALON_DEFAULT_ROOM") or "salon",
        agent_name=cfg.text("AGENT_SALON_NAME"),
        agent_rooms=cfg.items("AGENT_SALON_ROOM"),
        client=cfg.text("AGENT_SALON_CLIENT"),
        headless={None: "", True: "1", False: "0"}[headless],
        relay_secret=cfg.text("AGENT_SALON_RELAY_SECRET"),
        relay_retention_hours=cfg.integer(
            "AGENT_SALON_RELAY_RETENTION_HOURS", minimum=1, maximum=24 * 3650
        ),
        # the largest ciphertext of one entry: content (64 KiB) and meta (16 KiB) fit
        relay_max_entry_bytes=cfg.integer("AGENT_SALON_RELAY_MAX_ENTRY_BYTES", minimum=1024),
        relay_rate=cfg.integer("AGENT_SALON_RELAY_RATE", minimum=1),
        relay_room_entries=cfg.integer("AGENT_SALON_RELAY_ROOM_ENTRIES", minimum=1),
        relay_room_bytes=cfg.integer("AGENT_SALON_RELAY_ROOM_BYTES", minimum=1024),
        relay_device_ttl_days=cfg.integer(
            "AGENT_SALON_RELAY_DEVICE_TTL_DAYS", minimum=1, maximum=3650
        ),
        triage_cmd=triage_command(cfg.text("AGENT_SALON_TRIAGE_CMD")),
        triage_timeout=cfg.integer("AGENT_SALON_TRIAGE_TIMEOUT", minimum=1, maximum=600),
        triage_letterbox=cfg.flag("AGENT_SALON_TRIAGE"),
        triage_net=cfg.flag("AGENT_SALON_SAFETY_NET"),
        serve_timeout=cfg.integer("AGENT_SALON_SERVE_TIMEOUT", minimum=1, maximum=600),
        header_timeout=cfg.integer("AGENT_SALON_HEADER_TIMEOUT", minimum=1, maximum=3600),
        body_timeout=cfg.integer("AGENT_SALON_BODY_TIMEOUT", minimum=1, maximum=3600),
        connections_per_address=cfg.integer("AGENT_SALON_CONNECTIONS_PER_ADDRESS"),
    )
    if result.client and result.client not in CLIENTS:
        raise ConfigError(
            f"AGENT_SALON_CLIENT={result.client!r} is not a client agent-salon knows; "
            f"use one of {', '.join(CLIENTS)} (or leave it unset)"
        )
    if result.relay_secret and len(result.relay_secret) < MIN_RELAY_SECRET_CHARS:
        raise ConfigError(
            f"AGENT_SALON_RELAY_SECRET is {len(result.relay_secret)} characters long; use at "
            f"least {MIN_RELAY_SECRET_CHARS} (e.g. the output of `openssl rand -hex 32`)"
        )
    for variable, what, names in (
        ("AGENT_SALON_DEFAULT_ROOM", "room", [result.default_room]),
        ("AGENT_SALON_ROOM", "room", result.agent_rooms),
        ("AGENT_SALON_NAME", "agent", [result.agent_name] if result.agent_name else []),
    ):
        for name in names:
            try:
                validate_name(name, what)
            except RuleError as exc:
                raise ConfigError(f"{variable}: {exc}") from None
    try:
        result.aliases = parse_aliases(cfg.raw("AGENT_SALON_ALIASES"))
    except RuleError as exc:
        raise ConfigError(f"AGENT_SALON_ALIASES: {exc}") from None
    try:
        result.session_idle = parse_duration(cfg.text("AGENT_SALON_SESSION_IDLE") or "7d")
    except RuleError as exc:
        raise ConfigError(f"AGENT_SALON_SESSION_IDLE: {exc}") from None
    return result


def triage_command(value: str) -> list[str]:
    """AGENT_SALON_TRIAGE_CMD as an argument list, split like a shell would (no shell
    runs it: nothing in it is expanded); empty = no judge."""
    import shlex

    try:
        return shlex.split(value)
    except ValueError as exc:
        raise ConfigError(
            f"AGENT_SALON_TRIAGE_CMD={value[:80]!r} cannot be split into words ({exc}); "
            "check its quotes"
        ) from None


def _peers(items: list[str]) -> frozenset[int]:
    if not items:
        return frozenset()  # the default: nothing to look up (a hook reads this too)
    from salond.peers import allowed_uids

    try:
        return allowed_uids(items)
    except ValueError as exc:
        raise ConfigError(
            f"AGENT_SALON_PEERS: {exc}; name users, uids or @groups, comma-separated"
        ) from None


PEER_LOOKUPS = ("auto", "netlink", "proc", "off")


def _peer_lookup(value: str) -> str:
    if value.lower() not in PEER_LOOKUPS:
        raise ConfigError(
            f"AGENT_SALON_PEER_LOOKUP={value[:40]!r} is not one of {', '.join(PEER_LOOKUPS)}"
        )
    return value.lower()


def _bind_address(value: str) -> str:
    if value == "127.0.0.1":
        return value  # the default, read by every command: no ipaddress module for it
    import ipaddress

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


def unknown_variables(values: Mapping[str, str]) -> list[str]:
    """Names that look like ours but are not: `AGENT_SALON_PROT`, `agent_salon_port`,
    or a config-file line written as `export AGENT_SALON_PORT=…`."""
    return sorted(k for k in values if "AGENT_SALON_" in k.upper() and k not in KNOWN)


def warn_unknown(values: Mapping[str, str], stream=None) -> None:
    import difflib

    for name in unknown_variables(values):
        guess = difflib.get_close_matches(name.split()[-1].upper(), KNOWN, n=1, cutoff=0.75)
        hint = (
            f"did you mean {guess[0]}?" if guess else f"known variables: {', '.join(sorted(KNOWN))}"
        )
        print(
            f"agent-salon: warning: unknown variable {name} is ignored; {hint}",
            file=stream or sys.stderr,
        )


class Settings:
    """Typed, strict reads over the merged environment."""

    def __init__(self, values: Mapping[str, str]):
        self.values = values

    def raw(self, name: str) -> str:
        return self.values.get(name, KNOWN.get(name, ""))

    def text(self, name: str) -> str:
        return self.raw(name).strip()

    def integer(self, name: str, *, minimum: int = 0, maximum: int | None = None) -> int:
        value = self.text(name) or KNOWN[name]
        if not re.fullmatch(r"[0-9]+", value):
            raise ConfigError(
                f"{name}={value!r} is not a whole number; set it to e.g. {KNOWN[name]}"
            )
        # A 5000-digit value is out of range, not a crash in int().
        number = int(value) if len(value) <= 18 else -1
        if number < minimum or (maximum is not None and number > maximum):
            upper = f"..{maximum}" if maximum is not None else " or more"
            raise ConfigError(f"{name}={value!r} is out of range; use {minimum}{upper}")
        return number

    def port(self, name: str) -> int:
        return self.integer(name, minimum=1, maximum=65535)

    def flag(self, name: str) -> bool:
        value = (self.text(name) or KNOWN[name] or "0").lower()
        if value in ("1", "true", "yes", "on"):
            return True
        if value in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{name}={value!r} is not a flag; use 1 or 0")

    def optional_flag(self, name: str) -> bool | None:
        """A flag that may be left unset: None means "work it out yourself"."""
        return self.flag(name) if self.text(name) else None

    def items(self, name: str) -> list[str]:
        """A comma-separated list; an empty value means the default list, like every
        other empty value (an empty AGENT_SALON_ALLOWED_HOSTS must not lock /mcp)."""
        value = self.raw(name) if self.text(name) else KNOWN.get(name, "")
        return [part.strip() for part in value.split(",") if part.strip()]
