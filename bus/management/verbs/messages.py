"""send, inbox, peek, unread, history: writing and reading entries."""

from __future__ import annotations

import sys
import time

from bus.management.verbs import formats, types
from bus.management.verbs.base import Output, Verb, add_json_flag


class Send(Verb):
    name = "send"
    summary = "write an entry into a room"
    help = (
        'Write an entry into ROOM: salon send ROOM TYPE "text" [--to a,b] [--re ID] '
        "[--meta k=v ...] [--create]. TYPE is QUESTION, ANSWER, FACT or REQUEST; "
        'the text "-" is read from stdin. Prints the send report (id, wakes, notices).'
    )

    def add_arguments(self, parser):
        parser.add_argument("room", type=types.room_arg, help="the room to write into")
        parser.add_argument(
            "entry_type",
            metavar="TYPE",
            type=types.type_arg,
            help="QUESTION, ANSWER, FACT or REQUEST (any case)",
        )
        parser.add_argument("text", help='the entry text (markdown); "-" reads stdin')
        parser.add_argument(
            "--to",
            type=types.names_arg,
            action="append",
            default=[],
            metavar="a,b",
            help="addressees: seats or agent names",
        )
        parser.add_argument("--re", metavar="ID", help="the id of the entry this answers")
        parser.add_argument(
            "--meta",
            type=types.meta_arg,
            nargs="+",
            action="extend",
            default=[],
            metavar="k=v",
            help="meta pairs (text values)",
        )
        parser.add_argument(
            "--create", action="store_true", help="create the room if it does not exist"
        )
        add_json_flag(parser)

    def arguments(self, options):
        text = sys.stdin.read() if options.text == "-" else options.text
        return {
            "room": options.room,
            "type": options.entry_type,
            "text": text,
            "to": [name for names in options.to for name in names],
            "re": options.re,
            "meta": dict(options.meta),
            "create": options.create,
        }

    def show(self, report, options, out: Output):
        if options.json:
            out.emit_json(report)
            for line in report["notice"]:
                out.note(f"salon send: notice: {line}")
        else:
            to = ", ".join(report["to"]) or "everyone"
            there = [f"{name} (decided there)" for name in report.get("decidedThere", [])]
            wakes = ", ".join([*report["wakes"], *there]) or "nobody"
            out.say(
                f"sent {report['type']} to {to} in {report['room']} as {report['from']} "
                f"(id {report['id']})\nwakes: {wakes}"
            )
            for line in report["notice"]:
                out.say(f"notice: {line}")
        if "warning" in report:
            out.note(f"salon send: warning: {report['warning']}")


class Ask(Verb):
    name = "ask"
    summary = "ask another project something its own code may answer"
    help = (
        "Send AGENT a request with an ask key: salon ask AGENT KEY [TEXT] [--wait S] "
        '[--room ROOM]. KEY is 1 to 4 segments joined by ":" (status:db). AGENT\'s '
        "project decides by its .agent-salon/policy.toml: serve (its code answers, nobody "
        "is woken), gate, wake or deny; the verdict and its reason are printed at once. "
        "With --wait S, waits up to S seconds for the answer and prints it."
    )

    def add_arguments(self, parser):
        parser.add_argument("agent", type=types.agent_arg, metavar="AGENT", help="who is asked")
        parser.add_argument("key", type=types.ask_arg, metavar="KEY", help="e.g. status:db")
        parser.add_argument("text", nargs="?", default="", help="what a person would read")
        parser.add_argument("--room", type=types.room_arg, help="default: your primary room")
        parser.add_argument(
            "--wait",
            type=types.seconds_arg,
            default=0.0,
            metavar="S",
            help="wait up to S seconds for the answer",
        )
        add_json_flag(parser)

    def arguments(self, options):
        return {
            "to": options.agent,
            "key": options.key,
            "text": options.text,
            "room": options.room,
        }

    def follow(self, report, options, answer):
        """--wait: look for the answer until it comes or the time is up (each look a
        short request, so a server's thread never waits here)."""
        if options.wait <= 0 or report.get("answer") or report.get("outcome") == "woken":
            return report
        deadline = time.monotonic() + options.wait
        pause = 0.002
        while True:
            reply = answer({"op": "answer", "args": {"id": report["id"]}})
            shown = reply.get("result") or {}
            if shown.get("answer") or shown.get("outcome") == "woken":
                return {**report, **shown}
            left = deadline - time.monotonic()
            if left <= 0:
                return {**report, **shown}
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.05)

    def show(self, report, options, out: Output):
        if options.json:
            out.emit_json(report)
            return None
        verdict = report.get("verdict") or "decided there"
        out.say(
            f"asked {', '.join(report['to'])} {report['ask']!r} in {report['room']} as "
            f"{report['from']} (id {report['id']})\n{verdict}: {report['reason']}"
        )
        answer = report.get("answer")
        if answer:
            took = f" in {answer['ms']} ms" if answer.get("ms") is not None else ""
            out.say(f"answer from {answer['from']}{took}:\n{answer['text'].rstrip()}")
        elif report.get("outcome") == "woken":
            out.say(f"a person is woken: {report.get('woke', '')}")
        elif options.wait > 0:
            out.say(f"no answer within {options.wait:g} s")
        return None


class Inbox(Verb):
    name = "inbox"
    summary = "read what is new for you (moves your cursor)"
    help = (
        "Read ROOM, or with no ROOM every room of this seat: the oldest unread entries by "
        "others (at most --limit, default 20), and move this seat's cursor over exactly "
        "those."
    )
    advance = True

    def add_arguments(self, parser):
        parser.add_argument(
            "room", nargs="?", type=types.room_arg, help="the room to read (default: all yours)"
        )
        parser.add_argument(
            "--limit", type=types.count_arg, default=20, metavar="N", help="at most N entries"
        )
        add_json_flag(parser)

    @property
    def op(self) -> str:
        return "inbox"

    def arguments(self, options):
        return {"room": options.room, "limit": options.limit, "advance": self.advance}

    def show(self, inbox, options, out: Output):
        if options.json:
            out.emit_json(inbox)
            return
        parts = [formats.format_entries(inbox["entries"])] if inbox["entries"] else []
        where = inbox["room"] or ", ".join(inbox["rooms"])
        again = " ".join(["salon inbox" if self.advance else "salon peek", inbox["room"] or ""])
        if inbox["more"]:
            parts.append(f"({inbox['waiting']} in {where}: run `{again.strip()}` again)")
        elif not inbox["entries"]:
            parts.append(f"nothing new in {where} for {inbox['seat']}")
        if inbox["tampered"]:
            parts.append(formats.tampered_warning(inbox["tampered"]))
        out.say("\n\n".join(parts))


class Peek(Inbox):
    name = "peek"
    summary = "look at what is new without moving your cursor"
    help = "Look at ROOM's unread entries like `inbox`, without moving this seat's cursor."
    advance = False


class Unread(Verb):
    name = "unread"
    summary = "mark the last entries unread again"
    help = "Mark the last N entries by others in ROOM unread again (default 1)."

    def add_arguments(self, parser):
        parser.add_argument("room", type=types.room_arg, help="the room")
        parser.add_argument(
            "count",
            metavar="N",
            type=types.count_arg,
            nargs="?",
            default=1,
            help="how many entries (default 1)",
        )
        add_json_flag(parser)

    def arguments(self, options):
        return {"room": options.room, "count": options.count}

    def show(self, result, options, out: Output):
        if options.json:
            out.emit_json(result)
            return
        out.say(
            f"{formats.plural(result['markedUnread'], 'entry', 'entries')} of {result['room']} "
            f"unread again for {result['seat']}"
        )


class History(Verb):
    name = "history"
    summary = "the last entries of a room, yours included"
    help = (
        "Show the last N entries of ROOM (default 20), or with no ROOM of every room of this "
        "seat, your own included, never clipped; the cursor does not move. A lone number is "
        "N (`salon history 5`); a room named only with digits takes N as well "
        "(`salon history 42 20`)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "room", nargs="?", type=types.room_arg, help="the room (default: all yours)"
        )
        parser.add_argument(
            "count",
            metavar="N",
            type=types.count_arg,
            nargs="?",
            help="how many entries (default 20)",
        )
        parser.add_argument(
            "--from",
            dest="sender",
            type=types.sender_arg,
            metavar="NAME",
            help="only entries by this seat or agent",
        )
        add_json_flag(parser)

    def arguments(self, options):
        room, count = options.room, options.count
        if count is None and room is not None and room.isdigit() and int(room) > 0:
            room, count = None, int(room)
        return {"room": room, "limit": count or 20, "sender": options.sender}

    def show(self, history, options, out: Output):
        if options.json:
            out.emit_json(history)
        elif history["entries"]:
            out.say(formats.format_entries(history["entries"]))
            if history["tampered"]:
                out.say("\n" + formats.tampered_warning(history["tampered"]))
        else:
            sender = options.sender
            where = history["room"] or ", ".join(history["rooms"]) or "any of your rooms"
            out.say(f"no entries in {where}" + (f" from {sender}" if sender else ""))


VERBS = [Send(), Ask(), Inbox(), Peek(), Unread(), History()]
