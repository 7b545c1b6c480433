"""`salon quiet [--for 2h] [--off]`: nothing wakes this seat while quiet (SPEC §7)."""

from __future__ import annotations

from bus.management import cli


class Command(cli.BusCommand):
    help = (
        "Turn this seat quiet (entries are still delivered, nothing wakes it): "
        "--for 90m|2h|1d sets an expiry, none means until `salon quiet --off`."
    )

    def add_arguments(self, parser):
        switch = parser.add_mutually_exclusive_group()
        switch.add_argument(
            "--for",
            dest="duration",
            type=cli.duration_arg,
            metavar="DURATION",
            help="how long, e.g. 90m, 2h, 1d",
        )
        switch.add_argument("--off", action="store_true", help="end the quiet now")
        cli.add_json_flag(parser)

    def handle(self, *, duration, off, json, **options):
        from bus import services

        result = services.set_quiet(seat=cli.my_seat(), duration=duration, off=off)
        if json:
            self.emit_json(result)
        elif not result["quiet"]:
            self.say(f"{result['seat']} is not quiet: waking entries wake it")
        elif result["quietUntil"]:
            self.say(f"{result['seat']} is quiet until {cli.local_time(result['quietUntil'])}")
        else:
            self.say(
                f"{result['seat']} is quiet with NO EXPIRY: nothing wakes it until "
                "`salon quiet --off`"
            )
