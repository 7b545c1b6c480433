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

from bus import strict


class SalonParser(CommandParser):
    def error(self, message):
        if not self.called_from_command_line:
            raise CommandError(f"Error: {message}")
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def one_line(text: object) -> str:
    return " ".join(str(text).split())


class SalonCommand(BaseCommand):
    def create_parser(self, prog_name, subcommand, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        parser = super().create_parser(
            prog_name.replace("manage.py", "salon"), subcommand, **kwargs
        )
        parser.__class__ = SalonParser
        return parser

    def prefix(self, argv: list[str]) -> str:
        """How a refusal starts: `salon <command>`."""
        return f"salon {argv[1]}"

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
        prefix = self.prefix(argv)
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
            from bus.management.ops import explain

            self.stderr.write(f"{prefix}: {explain(exc)}")
            sys.exit(1)
        finally:
            with contextlib.suppress(Exception):  # nothing useful to report while leaving
                connections.close_all()


class BusCommand(SalonCommand):
    """A command that speaks for a seat or reads the bus: fast, quiet, strict.

    System checks are skipped (they import the URLconf and admin, and cost start-up time
    on every hook and cron call); `salon check` runs them.
    """

    requires_system_checks: list[str] = []
    suppressed_base_arguments = {
        "--version",
        "--settings",
        "--pythonpath",
        "--no-color",
        "--force-color",
    }

    def usage(self, message: str):
        """A usage error found after parsing (exit status 2, like argparse's own)."""
        return CommandError(message, returncode=2)

    def say(self, text: str) -> None:
        # safe_text: a stored row may hold a lone surrogate, which no UTF-8 stream takes.
        self.stdout.write(strict.safe_text(text))

    def note(self, text: str) -> None:
        """A notice or warning: stderr, so stdout stays pure JSON under --json."""
        self.stderr.write(strict.safe_text(text), style_func=lambda s: s)


def caller_from_settings() -> dict:
    """Who a command run through `manage.py` speaks for (bus.management.verbs.caller),
    from Django's settings (which read the environment and the config file)."""
    from django.conf import settings

    from bus.management import verbs

    environ = dict(os.environ)
    environ["AGENT_SALON_NAME"] = settings.AGENT_NAME
    environ["AGENT_SALON_ROOM"] = ",".join(settings.AGENT_ROOMS)
    return verbs.caller(environ)


def verb_command(name: str) -> type[BaseCommand]:
    """The `manage.py <verb>` form of a bus command: the same verb, run in-process."""
    from bus.management import verbs

    verb = verbs.find(name)

    class Command(BaseCommand):
        help = verb.help

        def create_parser(self, prog_name, subcommand, **kwargs):
            return verb.parser()

        def run_from_argv(self, argv):
            from bus.management import ops

            sys.exit(verbs.run([name, *argv[2:]], caller=caller_from_settings(), answer=ops.answer))

        def handle(self, *args, **options):
            raise CommandError(f"run it as `salon {name} …` or `manage.py {name} …`")

    return Command
