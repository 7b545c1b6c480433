"""`salon send ROOM TYPE "text"`: write an entry; print who it wakes (SPEC §5)."""

from __future__ import annotations

import sys

from bus.management import cli


class Command(cli.BusCommand):
    help = (
        'Write an entry into ROOM: salon send ROOM TYPE "text" [--to a,b] [--re ID] '
        "[--meta k=v ...] [--create]. TYPE is QUESTION, ANSWER, FACT or REQUEST; "
        'the text "-" is read from stdin. Prints the send report (id, wakes, notices).'
    )

    def add_arguments(self, parser):
        parser.add_argument("room", type=cli.room_arg, help="the room to write into")
        parser.add_argument(
            "entry_type",
            metavar="TYPE",
            type=cli.type_arg,
            help="QUESTION, ANSWER, FACT or REQUEST (any case)",
        )
        parser.add_argument("text", help='the entry text (markdown); "-" reads stdin')
        parser.add_argument(
            "--to",
            type=cli.names_arg,
            action="append",
            default=[],
            metavar="a,b",
            help="addressees: seats or agent names",
        )
        parser.add_argument("--re", metavar="ID", help="the id of the entry this answers")
        parser.add_argument(
            "--meta",
            type=cli.meta_arg,
            nargs="+",
            action="extend",
            default=[],
            metavar="k=v",
            help="meta pairs (text values)",
        )
        parser.add_argument(
            "--create", action="store_true", help="create the room if it does not exist"
        )
        cli.add_json_flag(parser)

    def handle(self, *, room, entry_type, text, to, re, meta, create, json, **options):
        from bus import services

        if text == "-":
            text = sys.stdin.read()
        report = services.send_entry(
            seat=cli.my_seat(),
            room=room,
            type=entry_type,
            text=text,
            to=[name for names in to for name in names],
            re=re,
            meta=dict(meta),
            create=create,
            via="cli",
        )
        if json:
            self.emit_json(report)
            for line in report["notice"]:
                self.note(f"salon send: notice: {line}")
            if "warning" in report:
                self.note(f"salon send: warning: {report['warning']}")
        else:
            self.emit_json(report, indent=2)
