"""What every verb is made of: its parser, its output, the Verb record. The verbs' modules
import these from here, and the package's __init__ gathers the verbs (no circle)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable

from bus import strict

TYPE_CHECKING = False  # not typing's: every command imports this module, and not typing
if TYPE_CHECKING:
    from typing import TextIO

SESSION_VARIABLE = "CLAUDE_CODE_SESSION_ID"


class UsageError(Exception):
    """Arguments that parse but do not make sense together (exit status 2)."""


class Formatter(argparse.HelpFormatter):
    """argparse's help formatter, given the terminal's width from os: its own asks shutil,
    whose import (with bz2, lzma and fnmatch) was ~4 ms of every command a server answers,
    as argparse makes a formatter for each argument it adds, help or not."""

    def __init__(self, prog: str, **kwargs) -> None:
        kwargs.setdefault("width", terminal_columns() - 2)  # as argparse's own, 2 for margin
        super().__init__(prog, **kwargs)


def terminal_columns() -> int:
    """The columns of the terminal, as shutil.get_terminal_size() tells them: COLUMNS
    if set, else stdout's terminal, else 80."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class Parser(argparse.ArgumentParser):
    """Strict: no abbreviated flags; a usage error is one line naming `--help`."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


class Output:
    """Where a verb writes: results on stdout, notices on stderr.

    Every line goes through strict.safe_text: a stored row may hold a lone surrogate,
    which no UTF-8 stream takes (escaped, it reads back the same from JSON)."""

    def __init__(self, stdout: TextIO | None = None, stderr: TextIO | None = None):
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr

    def say(self, text: str) -> None:
        self.stdout.write(strict.safe_text(text) + "\n")

    def emit_json(self, data, *, indent: int | None = None) -> None:
        self.say(json.dumps(data, ensure_ascii=False, indent=indent))

    def note(self, text: str) -> None:
        self.stderr.write(strict.safe_text(text) + "\n")


class Verb:
    """One bus command. Subclasses set name/help and fill in the three parts."""

    name = ""
    summary = ""  # one line for `salon --help`
    help = ""
    # Verbs that speak for a seat check the caller in; the others only read or administer.
    speaks_for_a_seat = True

    @property
    def op(self) -> str:
        return self.name

    def parser(self) -> Parser:
        parser = Parser(prog=f"salon {self.name}", description=self.help)
        self.add_arguments(parser)
        return parser

    def add_arguments(self, parser: Parser) -> None:
        pass

    def arguments(self, options: argparse.Namespace) -> dict:
        """The operation's JSON arguments (raise UsageError for a bad combination)."""
        return {}

    def follow(self, result, options: argparse.Namespace, answer: Callable[[dict], dict]):
        """What to print, after asking more of the same store if the verb needs to
        (`answer(request)` takes an op and its args); the result as it came by default."""
        return result

    def show(self, result, options: argparse.Namespace, out: Output) -> int | None:
        """Print the answer; a verb whose answer is a verdict on something (`policy
        check`) returns its exit status."""
        raise NotImplementedError


def add_json_flag(parser: Parser) -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document on stdout (notices and warnings go to stderr)",
    )


# ---------------------------------------------------------------- the table


def one_line(text: object) -> str:
    return " ".join(str(text).split())
