"""The `salon` console script: `salon <command>` is `manage.py <command>`, made fast.

Hooks and cron run `salon send`, `salon inbox`, `salon hook stop` … on every turn, so
this module imports no Django until it must:

* `salon hook KIND` goes to the never-failing hook runner (mcpgate.claude.runner);
* a bus command (bus.management.verbs: send, inbox, agents, …) is parsed here and its
  request goes to a running server of the store over the local line (salond.line); only
  when none answers does this process load the lean Django app set and answer it itself;
* `salon mcp` starts with the lean app set too (Claude Code waits for it at every
  session start);
* `salon join salon-join:…` is a machine joining a bridged room (`salon relay join`),
  not a seat joining a room;
* `uninstall` and `wait` (LEAN_COMMANDS) run with the lean app set too, without
  Django's dispatcher: Claude Code's Monitor starts `salon wait` again every ten
  minutes, and neither needs the server, the admin or auth;
* every other command (`serve`, `install`, `relay`, `migrate`, `createsuperuser`, …)
  runs with the full INSTALLED_APPS through Django's own dispatcher.

`salon`, `salon help` and `salon --help` list agent-salon's commands; `salon help --all`
adds Django's own; `salon help NAME` is `salon NAME --help`. A misspelt command or option
(`salon sned`, `salon help nosuch`, `salon --versio`) is one line naming the closest one
(exit 2).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

# Commands that run until Ctrl-C.
SERVERS = frozenset({"serve", "runserver"})

# Django commands that run on the lean app set (bus.management.lean): command → its app.
# Not `install`: it migrates a new store itself, and a migration needs every app.
LEAN_COMMANDS = {
    "uninstall": "mcpgate",
    "wait": "mcpgate",
}

# What `salon --help` lists, beside the bus commands (bus.management.verbs lists those).
COMMANDS = {
    "Claude Code": {
        "install": "wire this project's Claude Code sessions to the bus",
        "uninstall": "remove from this project what install added",
        "wait": "for Claude Code's Monitor: print each entry that is a claim on this seat",
        "hook": "run by Claude Code: session-start, stop, heartbeat, session-end, mcp-headers",
        "mcp": "the MCP tools over stdio (what Claude Code starts)",
    },
    "the store and the daemon": {
        "watch": "print each new entry as it is stored, with whom it wakes",
        "top": "the operator's full-screen view: rooms, seats and the live flow",
        "serve": "run the daemon (MCP endpoint, webhook, admin)",
        "where": "which store, secret and data directory, and whether a server runs",
        "backup": "a consistent copy of the store, with its secret",
        "migrate": "bring the store's tables up to date",
        "createsuperuser": "a login for the admin",
    },
    "across machines": {
        "relay": "use a relay, bridge rooms through it, or serve one (docs/RELAY.md)",
        "invite": "a one-time salon-join: string; `salon join` it on the other machine",
    },
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "salon.settings")
    command = argv[0] if argv else "help"
    answered = _answered_before_settings(command, argv)
    if answered is not None:
        return answered
    if command in SERVERS:
        _take_back_sigint()
    return guarded(_runner(command, argv))


def _answered_before_settings(command: str, argv: list[str]) -> int | None:
    """What is answered before any setting is read: the hooks, the version, help, and a
    refusal of an option nobody knows."""
    if command == "hook":
        # Claude Code hooks never fail a turn, not even on a malformed setting: the hook
        # runner reads the settings itself and always exits 0.
        return run_hook(argv[1:])
    if command in ("--version", "version"):
        print(f"agent-salon {version()}")
        return 0
    if command in ("help", "--help", "-h") and argv[1:] != ["--all"]:
        return _help(argv[1:])
    if command.startswith("-") and not _django_options(argv):
        return _unknown(command, ["--help", "-h", "--version"], what="option")
    return None


def _runner(command: str, argv: list[str]) -> Callable[[], int]:
    """What runs the command: the lightest path that can (no Django where none is
    needed; the lean app set where it is enough), else Django's own dispatcher."""
    plain = not _django_options(argv)
    if command == "where" and plain:
        return lambda: run_where(argv[1:])
    if argv == ["mcp"]:
        return lambda: run_stdio(argv)
    if command == "join" and any(arg.startswith("salon-join:") for arg in argv[1:]):
        return lambda: _prepare(argv) or _run_django(["relay", *argv])
    from bus.management import verbs

    if verbs.find(command) and plain:
        return lambda: run_verb(argv)
    if command in LEAN_COMMANDS and plain:
        return lambda: _prepare(argv) or run_lean(argv)
    return lambda: _prepare(argv) or _run(argv)


def _run(argv: list[str]) -> int:
    if argv[:1] == ["mcp"] and not _django_options(argv):
        return run_stdio(argv, greet=False)
    return _run_django(argv)


def guarded(run: Callable[[], int]) -> int:
    """A malformed setting is one line, no traceback (exit 2); Ctrl-C is exit 130."""
    from salon.config import ConfigError

    try:
        return run()
    except KeyboardInterrupt:
        print("agent-salon: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        bad_setting = isinstance(exc, ConfigError) or type(exc).__name__ == "ImproperlyConfigured"
        if not bad_setting:
            raise
        print(f"agent-salon: configuration error: {exc}", file=sys.stderr)
        return 2


def version() -> str:
    from salon import __version__

    return __version__


def usage() -> str:
    from bus.management import verbs

    lines = [
        f"agent-salon {version()}: where coding-agent sessions meet in rooms.",
        "usage: salon COMMAND [ARGS] (salon COMMAND --help says more)",
        "",
        "the bus:",
        *(f"  {name:<16}{verbs.find(name).summary}" for name in verbs.names()),
    ]
    for group, commands in COMMANDS.items():
        lines += ["", f"{group}:", *(f"  {name:<16}{text}" for name, text in commands.items())]
    lines += ["", "salon help --all also lists Django's own commands (salon is manage.py)."]
    return "\n".join(lines)


# ---------------------------------------------------------------- the ways to run


# Commands that never need the store's tables (or make them themselves).
NO_TABLES = frozenset(
    {
        "migrate",
        "makemigrations",
        "showmigrations",
        "sqlmigrate",
        "serve",
        "install",
        "uninstall",
        "where",
        "backup",
    }
)


def _line(values: dict[str, str]):
    """How this process reaches its store: ready to open (salon.store), by a running
    server, else here (creating the tables first if the store is new)."""
    from salon import config, store
    from salond.line import Line

    where = store.prepare(values)
    return Line(
        where.store,
        config.settings_key(values),
        prepare=lambda: store.ensure_tables(where),
        default_store=store.is_default(values, where),
    )


def _prepare(argv: list[str]) -> None:
    """The store ready before Django reads its settings (its data directory, file modes
    and secret; its tables, for the commands that use them)."""
    from salon import config, store

    command = argv[0] if argv else "help"
    if command in ("where", "uninstall") or "--dry-run" in argv:
        # `where` describes the store as it is; `uninstall` never opens it; a dry run
        # writes nothing at all
        return
    values = config.merged_environment()
    where = store.prepare(values)
    if command not in NO_TABLES:
        store.ensure_tables(where)


def run_hook(argv: list[str]) -> int:
    from mcpgate.claude.runner import run_hook
    from salon import config, store

    return run_hook(
        argv, environment=config.merged_environment, line_for=_line,
        data_dir=store.default_data_dir,
    )  # fmt: skip


def run_verb(argv: list[str]) -> int:
    """A bus command: by a running server of the store if one answers, else here."""
    from bus.management import verbs
    from salon import config

    values = config.merged_environment()
    config.read(values)  # a malformed setting is refused before anything is asked
    return verbs.run(argv, caller=verbs.caller(values), answer=_line(values).answer)


def run_where(argv: list[str]) -> int:
    """`salon where` without Django: settings, paths and the servers' own answers are all
    it needs, and it answers as fast as any other command."""
    import json

    from bus.management.verbs import Parser
    from salon import config, store

    parser = Parser(prog="salon where", description=store.WHERE_HELP)
    parser.add_argument("--json", action="store_true", help="one JSON document")
    options = parser.parse_args(argv)
    found = store.describe(config.merged_environment())
    print(json.dumps(found) if options.json else "\n".join(store.describe_lines(found)))
    return 0


def run_stdio(argv: list[str], *, greet: bool = True) -> int:
    """`salon mcp`: `initialize` answered first (mcpgate.greeting: Claude Code waits for
    it at every session start), then the store made ready and the lean app set loaded (no
    daphne, admin or auth) while the client sends what follows."""
    greeted = (None, b"")
    if greet:
        from mcpgate import greeting

        greeted = greeting.answer_first_line(
            sys.stdin.buffer, sys.stdout.buffer, greeting.MAX_MESSAGE_BYTES
        )
        _prepare(argv)
    from bus.management import lean

    lean.setup()
    from mcpgate.management.commands.mcp import Command

    command = Command()
    command.greeted = greeted
    command.run_from_argv(["salon", *argv])
    return 0


def run_lean(argv: list[str]) -> int:
    """A command of LEAN_COMMANDS: the lean app set, and the command class run directly
    (Django's dispatcher would set up logging and the URL prefix first: ~0.1 s)."""
    from bus.management import lean

    lean.setup()
    from django.core.management import load_command_class

    load_command_class(LEAN_COMMANDS[argv[0]], argv[0]).run_from_argv(["salon", *argv])
    return 0


def _django_options(argv: list[str]) -> bool:
    # --settings / --pythonpath are Django's dispatcher's business: let it handle them.
    return any(arg.startswith(("--settings", "--pythonpath")) for arg in argv)


def _run_django(argv: list[str]) -> int:
    import django

    django.setup()
    from django.core.management import execute_from_command_line, get_commands

    known = [*get_commands(), "help"]
    if argv and not argv[0].startswith("-") and argv[0] not in known:
        return _unknown(argv[0], [*known, "hook", "mcp"])
    execute_from_command_line(["salon", *(argv or ["help"])])
    return 0


def _help(rest: list[str]) -> int:
    """`salon help` lists the commands; `salon help NAME` is `salon NAME --help`, so a
    misspelt NAME is the same one line as a misspelt command."""
    if not rest or rest[0] in ("help", "--help", "-h"):
        print(usage())
        return 0
    if len(rest) > 1 or rest[0].startswith("-"):
        print(
            "salon help: give one command name, e.g. `salon help send` (salon --help lists them)",
            file=sys.stderr,
        )
        return 2
    return main([rest[0], "--help"])


def _unknown(name: str, known: list[str], *, what: str = "command") -> int:
    import difflib

    guess = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"did you mean `salon {guess[0]}`? " if guess else ""
    print(
        f"salon: there is no {what} {name[:64]!r}; {hint}(salon --help lists them)",
        file=sys.stderr,
    )
    return 2


def _take_back_sigint() -> None:
    """A shell without job control starts `salon serve &` with SIGINT ignored, and Python
    and daphne then leave it ignored: `kill -INT` would do nothing. A server stops on
    Ctrl-C, so take the signal back."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


if __name__ == "__main__":
    sys.exit(main())
