"""The `salon` console script: `salon <command>` runs `manage.py <command>`.

Start-up time matters: hooks and cron run `salon send` and `salon inbox` on every turn.
The bus commands named in LEAN_COMMANDS therefore start with settings.CLI_APPS (the
project's own apps: no daphne/twisted, admin, auth or channels to import) and are
loaded straight from bus/management/commands without scanning every app for commands.
Every other command — `serve`, `migrate`, `makemigrations`, `createsuperuser`, `check`,
`shell`, … — runs with the full INSTALLED_APPS through Django's own dispatcher, so a
migration never runs with the lean set. bench/RESULTS.md has the numbers.
"""

from __future__ import annotations

import os
import sys

# Bus commands that only touch bus rows through bus.services. A command joins this set
# only if it needs nothing from the admin, auth, contenttypes, sessions or channels apps
# (tests/test_cli.py checks that each one is a bus command and none is a Django one).
LEAN_COMMANDS = frozenset(
    {
        "send",
        "inbox",
        "peek",
        "unread",
        "history",
        "agents",
        "focus",
        "rooms",
        "join",
        "part",
        "quiet",
        "prune",
        "token",
        "wait",
        "stats",
    }
)


# Run by the fork server when one is up (salon/forkserver.py); `wait` watches its own
# parent process, which a forked child does not have.
FORKED_COMMANDS = LEAN_COMMANDS - {"wait"}

# Commands that run until Ctrl-C.
SERVERS = frozenset({"serve", "runserver"})


def _lean(argv: list[str]) -> bool:
    # --settings / --pythonpath are Django's dispatcher's business: let it handle them.
    return (
        bool(argv)
        and argv[0] in LEAN_COMMANDS
        and not any(arg.startswith(("--settings", "--pythonpath")) for arg in argv)
    )


def _setup_lean(settings) -> None:
    """django.setup() for a bus command, minus what it does not need.

    * `from django.urls import set_script_prefix`: the URL machinery pulls in
      django.http and the serializers for a prefix that only matters when serving.
    * Logging configuration: Django's DEFAULT_LOGGING has a `mail_admins` handler whose
      set-up imports django.views.debug (http, urls, templates: ~95 ms measured) to
      e-mail errors no command sends, and logging.config itself costs ~5-10 ms. A bus
      command logs nothing below WARNING; Python's last-resort handler still writes
      warnings and errors (with their traceback, as the `salon` logger would) to stderr.
    """
    from django.apps import apps

    apps.populate(settings.INSTALLED_APPS)


def _take_back_sigint() -> None:
    """A shell without job control starts `salon serve &` with SIGINT ignored, and Python
    and daphne then leave it ignored: `kill -INT` would do nothing. A server stops on
    Ctrl-C, so take the signal back."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "salon.settings")
    if argv[:1] == ["hook"]:
        # Claude Code hooks never fail a turn, not even on a malformed setting: the hook
        # runner reads the settings itself and always exits 0 (bus/claude.py).
        from bus.claude import run_hook

        return run_hook(argv[1:])
    if argv[:1] and argv[0] in SERVERS:
        _take_back_sigint()
    if _lean(argv) and argv[0] in FORKED_COMMANDS:
        from salon import forkserver

        status = forkserver.run_forked(argv)
        if status is not None:
            return status
    return _run(argv)


def run_in_fork(argv: list[str]) -> int:
    """A command in a child of the fork server (salon/forkserver.py): Django is loaded
    with the fork server's environment; read the settings again from the caller's."""
    from django.conf import settings
    from django.db import connections
    from django.utils.functional import empty

    sys.modules.pop("salon.settings", None)
    settings._wrapped = empty
    connections.__dict__.pop("settings", None)  # DATABASES, read again on first use
    return _run(argv)


def _run(argv: list[str]) -> int:
    from django.core.exceptions import ImproperlyConfigured

    lean = _lean(argv)
    try:
        import django
        from django.conf import settings

        if lean and getattr(settings, "CLI_APPS", None):
            settings.INSTALLED_APPS = list(settings.CLI_APPS)
        else:
            lean = False
        if lean:
            _setup_lean(settings)
        else:
            django.setup()
    except ImproperlyConfigured as exc:
        # A malformed setting is the user's to fix: one line, no traceback.
        print(f"agent-salon: configuration error: {exc}", file=sys.stderr)
        return 2
    try:
        if lean:
            from django.core.management import load_command_class

            load_command_class("bus", argv[0]).run_from_argv(["salon", *argv])
            return 0
        from django.core.management import execute_from_command_line

        execute_from_command_line(["salon", *argv])
    except ImproperlyConfigured as exc:
        # Raised late by some settings (a database engine that cannot be loaded …).
        print(f"agent-salon: configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # Ctrl-C in a command (or during `serve`'s migrations): stop, no traceback.
        print("agent-salon: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
