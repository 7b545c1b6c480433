"""The base of every `salon` command: strict flags, one-line refusals, no tracebacks.

* No abbreviated flags: `prune --dry` must not be read as `--dry-run`.
* A usage error (unknown flag, missing or misplaced argument) is ONE line on stderr,
  `salon <command>: <what> (see salon <command> --help)`, exit status 2.
* A refusal (CommandError, or a bus.rules.RuleError from the services) is ONE line on
  stderr, `salon <command>: <message>`, exit status 1. Anything unexpected is one line
  too, naming the exception; `--traceback` shows the stack for a bug report.
"""

from __future__ import annotations

import contextlib
import os
import sys

from django.core.management.base import BaseCommand, CommandError, CommandParser


class SalonParser(CommandParser):
    def error(self, message):
        if not self.called_from_command_line:
            raise CommandError(f"Error: {message}")
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def one_line(text: object) -> str:
    return " ".join(str(text).split())


def explain(exc: BaseException) -> str:
    """The one line a user sees for an exception that is not a refusal."""
    from django.db import DatabaseError

    text = one_line(exc)
    if isinstance(exc, DatabaseError):
        if "no such table" in text or "does not exist" in text:
            return (
                f"the database has no agent-salon tables yet ({text}): "
                "run `salon migrate` (or `salon serve`, which applies migrations)"
            )
        if "no such column" in text:
            return (
                f"the database is older than this agent-salon ({text}): "
                "run `salon migrate` to bring it up to date"
            )
        if "locked" in text:
            return f"the database is busy ({text}); try again in a moment"
        return f"database error: {text}"
    return (
        f"internal error: {type(exc).__name__}: {text} "
        "(run again with --traceback for the details of a bug report)"
    )


class SalonCommand(BaseCommand):
    def create_parser(self, prog_name, subcommand, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        parser = super().create_parser(
            prog_name.replace("manage.py", "salon"), subcommand, **kwargs
        )
        parser.__class__ = SalonParser
        return parser

    def refuse(self, message: str) -> CommandError:
        return CommandError(message)

    def execute(self, *args, **options):
        from bus.rules import RuleError

        try:
            return super().execute(*args, **options)
        except RuleError as exc:
            raise CommandError(str(exc)) from exc

    def run_from_argv(self, argv):
        """Django's run_from_argv, with every failure reduced to one line on stderr."""
        from django.core.management.base import handle_default_options
        from django.db import connections

        self._called_from_command_line = True
        parser = self.create_parser(argv[0], argv[1])
        options = parser.parse_args(argv[2:])
        cmd_options = vars(options)
        args = cmd_options.pop("args", ())
        handle_default_options(options)
        prefix = f"salon {argv[1]}"
        try:
            self.execute(*args, **cmd_options)
        except KeyboardInterrupt:
            sys.exit(130)
        except BrokenPipeError:
            # The reader went away (`salon history team | head`): nothing left to say.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(1)
        except CommandError as exc:
            if options.traceback:
                raise
            self.stderr.write(f"{prefix}: {one_line(exc)}")
            sys.exit(exc.returncode)
        except Exception as exc:
            if options.traceback:
                raise
            self.stderr.write(f"{prefix}: {explain(exc)}")
            sys.exit(1)
        finally:
            with contextlib.suppress(Exception):  # nothing useful to report while leaving
                connections.close_all()
