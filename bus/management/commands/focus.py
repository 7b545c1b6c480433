"""`salon focus ["text"] [--files a,b] [--phase P]`: what this seat is on (SPEC §7)."""

from __future__ import annotations

from bus.management import cli


class Command(cli.BusCommand):
    help = (
        'Declare what this seat is on: focus "sentence" [--files a,b] [--phase P]. '
        "--phase alone re-declares the standing sentence; no arguments read it back; "
        'focus "" clears it.'
    )

    def add_arguments(self, parser):
        parser.add_argument("text", nargs="?", help='one sentence; "" clears the focus')
        parser.add_argument(
            "--files",
            type=cli.files_arg,
            metavar="a,b",
            help="the files it touches, comma-separated",
        )
        parser.add_argument(
            "--phase", type=cli.phase_arg, help="explore, plan, apply, verify or blocked"
        )
        cli.add_json_flag(parser)

    def handle(self, *, text, files, phase, json, **options):
        from bus import services

        result = services.declare_focus(seat=cli.my_seat(), text=text, files=files, phase=phase)
        if json:
            self.emit_json(result)
        else:
            self.say(cli.format_focus(result["seat"], result["focus"]))
