"""The bus commands of `salon` (send, inbox, agents, …), without Django.

A verb is three things: its arguments (argparse), the request it makes (an operation of
bus.management.ops and that operation's JSON arguments), and how it shows the answer.
Who runs the request is the caller's choice: `salon` asks a running server of the store
over its local line and only works on the store itself when none answers (salon/cli.py);
`python manage.py <verb>` always works in-process. Either way the same operation runs
and the same bytes are printed.

* Usage errors (an unknown or misplaced flag, a bad name) are one line on stderr, exit 2,
  before anything is asked: a refused argument writes nothing.
* A refusal by the bus is one line on stderr, `salon <verb>: <message>`, exit 1.
* Output is for people by default; with `--json`, stdout is one JSON document and any
  notice or warning goes to stderr.

Standard library only (and bus.rules): hooks and cron run these on every turn.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from collections.abc import Callable, Mapping

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


def _table() -> dict[str, Verb]:
    from bus.management.verbs import messages, policy, presence, rooms, search, upkeep

    verbs = [
        *messages.VERBS,
        *search.VERBS,
        *presence.VERBS,
        *rooms.VERBS,
        *upkeep.VERBS,
        *policy.VERBS,
    ]
    return {verb.name: verb for verb in verbs}


_VERBS: dict[str, Verb] | None = None


def find(name: str) -> Verb | None:
    global _VERBS
    if _VERBS is None:
        _VERBS = _table()
    return _VERBS.get(name)


def names() -> list[str]:
    """Every verb, in the order `salon --help` lists them."""
    find("")
    return list(_VERBS or {})


# ---------------------------------------------------------------- who asks


def caller(environ: Mapping[str, str], cwd: str | None = None) -> dict:
    """Who a command speaks for, from its environment (merged with the config
    file): the agent is AGENT_SALON_NAME, else the working directory's name; the seat's
    session is CLAUDE_CODE_SESSION_ID (none: the bare agent name); AGENT_SALON_ROOM are
    the rooms a new seat joins. The server checks the names (bus.management.ops)."""
    agent = environ.get("AGENT_SALON_NAME", "").strip()
    source = "AGENT_SALON_NAME"
    if not agent:
        source = "the working directory's name"
        try:
            agent = os.path.basename((cwd or os.getcwd()).rstrip("/"))
        except OSError:
            agent = ""
    rooms = [r.strip() for r in environ.get("AGENT_SALON_ROOM", "").split(",") if r.strip()]
    return {
        "agent": agent,
        "agentFrom": source,
        "session": environ.get(SESSION_VARIABLE, "").strip() or None,
        "rooms": rooms,
        "host": socket.gethostname(),
    }


# ---------------------------------------------------------------- running one


Answer = Callable[[dict], dict]


def run(argv: list[str], *, caller: dict, answer: Answer, out: Output | None = None) -> int:
    """`salon VERB ARGS…`: parse, ask `answer` to run the request, show the result.

    `answer(request)` returns `{"result": …}` or `{"refusal": …, "status": N}`.
    Returns the exit status.
    """
    out = out or Output()
    verb = find(argv[0])
    assert verb is not None, argv[0]
    options = verb.parser().parse_args(argv[1:])  # exits 2 on a usage error
    prefix = f"salon {verb.name}"
    try:
        arguments = verb.arguments(options)
    except UsageError as exc:
        out.note(f"{prefix}: {exc} (see `{prefix} --help`)")
        return 2
    reply = answer({"op": verb.op, "args": arguments, "caller": caller})
    if "refusal" in reply:
        out.note(f"{prefix}: {one_line(reply['refusal'])}")
        return int(reply.get("status", 1))
    try:
        status = verb.show(reply["result"], options, out)
    except BrokenPipeError:
        return 1  # the reader went away (`salon history team | head`): nothing left to say
    return status or 0


def one_line(text: object) -> str:
    return " ".join(str(text).split())
