"""agents, focus, quiet: who is on the bus and what they say of themselves."""

from __future__ import annotations

from bus.management.verbs import claims, formats, types
from bus.management.verbs.base import Output, Verb, add_json_flag


class Agents(Verb):
    name = "agents"
    summary = "who is on the bus: seats, liveness, focus, quiet"
    help = (
        "Show every agent with its seats: liveness, last wrote, quiet, focus. "
        "--json prints the salon.agents/1 contract."
    )
    speaks_for_a_seat = False

    def add_arguments(self, parser):
        add_json_flag(parser)

    def show(self, projection, options, out: Output):
        if options.json:
            out.emit_json(projection)
        else:
            out.say(formats.format_agents(projection))


class Focus(Verb):
    name = "focus"
    summary = "say what this seat is on"
    help = (
        'Declare what this seat is on: focus "sentence" [--files a,b] [--phase P]. '
        "--phase alone re-declares the standing sentence; --files also claims them in this "
        "repository (see `salon claim`); no arguments read it back; "
        'focus "" clears it.'
    )

    def add_arguments(self, parser):
        parser.add_argument("text", nargs="?", help='one sentence; "" clears the focus')
        parser.add_argument(
            "--files", type=types.files_arg, metavar="a,b", help="the files it touches"
        )
        parser.add_argument(
            "--phase", type=types.phase_arg, help="explore, plan, apply, verify or blocked"
        )
        add_json_flag(parser)

    def arguments(self, options):
        arguments = {"text": options.text, "files": options.files, "phase": options.phase}
        if options.files is not None or options.text == "":
            # --files claims them too, in the repository the command runs in (if any).
            place = claims.where()
            if place is not None:
                arguments["repo"] = place.common
                if options.files:
                    arguments["files"] = claims.relative_paths(options.files, place)
        return arguments

    def show(self, result, options, out: Output):
        if options.json:
            out.emit_json(result)
        else:
            out.say(formats.format_focus(result["seat"], result["focus"]))
            if result.get("claims"):
                out.say(f"claimed: {', '.join(result['claims']['claimed'])}")


class Quiet(Verb):
    name = "quiet"
    summary = "stop being woken for a while"
    help = (
        "Turn this seat quiet (entries are still delivered, nothing wakes it): "
        "--for 90m|2h|1d sets an expiry, none means until `salon quiet --off`."
    )

    def add_arguments(self, parser):
        switch = parser.add_mutually_exclusive_group()
        switch.add_argument(
            "--for",
            dest="duration",
            type=types.duration_arg,
            metavar="DURATION",
            help="how long, e.g. 90m, 2h, 1d",
        )
        switch.add_argument("--off", action="store_true", help="end the quiet now")
        add_json_flag(parser)

    def arguments(self, options):
        return {"duration": options.duration, "off": options.off}

    def show(self, result, options, out: Output):
        if options.json:
            out.emit_json(result)
        elif not result["quiet"]:
            out.say(f"{result['seat']} is not quiet: waking entries wake it")
        elif result["quietUntil"]:
            out.say(f"{result['seat']} is quiet until {formats.local_time(result['quietUntil'])}")
        else:
            out.say(
                f"{result['seat']} is quiet with NO EXPIRY: nothing wakes it until "
                "`salon quiet --off`"
            )


VERBS = [Agents(), Focus(), Quiet()]
