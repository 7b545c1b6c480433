"""search: the entries of your rooms that hold some words, most relevant first."""

from __future__ import annotations

from bus import rules, strict
from bus.management.verbs import formats, types
from bus.management.verbs.base import Output, Parser, Verb, add_json_flag

# Words of the query that start with `-` (a word left out) would read as flags: they
# cross argparse behind this mark, which no flag starts with.
_MARK = "\x00"
_TAKES_VALUE = {"--room", "--from", "--type", "--since", "--limit"}
BOLD, PLAIN = "\x1b[1m", "\x1b[22m"


class QueryParser(Parser):
    """The parser of `salon search`: `-word` is part of the query, not a flag."""

    def parse_args(self, args=None, namespace=None):
        marked, after = [], None
        for arg in args or []:
            word = arg.startswith("-") and not arg.startswith("--") and arg not in ("-", "-h")
            marked.append(_MARK + arg if word and after not in _TAKES_VALUE else arg)
            after = arg
        options = super().parse_args(marked, namespace)
        options.query = [word.removeprefix(_MARK) for word in options.query]
        return options


def shown_snippet(result: dict, *, bold: bool) -> str:
    """A result's snippet for a terminal: every character of the entry escaped
    (strict.terminal_safe), the hits in bold on a terminal and between ** elsewhere."""
    before, after = (BOLD, PLAIN) if bold else ("**", "**")
    return rules.marked(
        result["snippet"], result["highlights"], before, after, strict.terminal_safe
    )


class Search(Verb):
    name = "search"
    summary = "find entries of your rooms by their words"
    help = (
        "Find the entries of your rooms that hold QUERY, most relevant first, then newest. "
        'QUERY: words (all must be there), "a phrase", prefix* (words starting so), '
        "-word (leave out entries holding it); quote the whole query for the shell, as in "
        "salon search 'cart \"total price\" -draft'. Never moves a cursor."
    )

    def parser(self) -> Parser:
        parser = QueryParser(prog=f"salon {self.name}", description=self.help)
        self.add_arguments(parser)
        return parser

    def add_arguments(self, parser):
        parser.add_argument("query", nargs="+", metavar="QUERY", help="what to look for")
        parser.add_argument(
            "--room", type=types.room_arg, metavar="ROOM", help="only this room (one of yours)"
        )
        parser.add_argument(
            "--from",
            dest="sender",
            type=types.sender_arg,
            metavar="NAME",
            help="only entries by this seat or agent",
        )
        parser.add_argument(
            "--type", dest="entry_type", type=types.type_arg, metavar="TYPE", help="only this type"
        )
        parser.add_argument(
            "--since",
            type=types.duration_arg,
            metavar="AGE",
            help="only entries of the last AGE (90m, 2h, 7d)",
        )
        parser.add_argument(
            "--limit", type=types.count_arg, default=20, metavar="N", help="at most N (≤ 200)"
        )
        add_json_flag(parser)

    def arguments(self, options):
        return {
            "query": " ".join(options.query),
            "room": options.room,
            "sender": options.sender,
            "type": options.entry_type,
            "since": options.since,
            "limit": options.limit,
        }

    def show(self, answer, options, out: Output):
        if options.json:
            out.emit_json(answer)
            for note in answer["notes"]:
                out.note(f"salon search: note: {note}")
            return
        bold = out.stdout.isatty()
        where = ", ".join(answer["rooms"]) if answer["rooms"] is not None else "every room"
        results = answer["results"]
        query = strict.terminal_safe(answer["query"])
        if results:
            out.say(
                f"{formats.plural(len(results), 'entry', 'entries')} for {query} in {where}, "
                "most relevant first:"
            )
        for result in results:
            room, kind, sender = (strict.loggable(result[k], 200) for k in ("room", "type", "from"))
            head = f"\n## {formats.local_time(result['ts'])} · {room} — {kind}  [{sender}]"
            if result["tampered"]:
                head += "  !!! TAMPERED: its row was changed outside the bus"
            out.say(f"{head}\n    {shown_snippet(result, bold=bold)}\n(id {result['id']})")
        if not results:
            out.say(f"nothing found for {query or 'an empty query'} in {where}")
        for note in answer["notes"]:
            out.say(f"note: {note}")


VERBS = [Search()]
