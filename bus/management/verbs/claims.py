"""claim, release: file claims, made where the command runs.

The repository is the one the working directory is in (bus.repos: its git common
directory, found here, in the caller's process: a server answering the request may run
anywhere). Paths are relative to the repository's top; an absolute path inside it is
made relative.
"""

from __future__ import annotations

import os

from bus import repos
from bus.management.verbs import formats, types
from bus.management.verbs.base import Output, UsageError, Verb, add_json_flag

NOT_IN_A_REPO = (
    "the working directory is in no git repository; claims are kept per repository: run "
    "it inside the repository (or a worktree of it) whose files you claim"
)


def where(cwd: str | None = None) -> repos.Place | None:
    return repos.locate(".", cwd or os.getcwd())


def relative_paths(paths: list[str], place: repos.Place) -> list[str]:
    """Absolute paths made relative to the repository's top; the rest as typed."""
    out = []
    for path in paths:
        if os.path.isabs(path):
            found = repos.locate(path)
            if found is None or found.common != place.common or not found.relative:
                raise UsageError(f"{path[:80]} is not inside this repository ({place.top})")
            path = found.relative
        out.append(path)
    return out


def age(minutes: int) -> str:
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m"


def show_claims(claims: list[dict], indent: str = "  ") -> list[str]:
    """One line per claim (bus.services.claims.shown)."""
    lines = []
    for c in claims:
        line = f"{indent}{c['path']} — {c['seat']}"
        if c["kind"] != "hand":
            line += f" ({c['kind']})"
        line += f", claimed {age(c['ageMinutes'])} ago, until {formats.local_time(c['until'])}"
        if c.get("note"):
            line += f': "{c["note"]}"'
        lines.append(line)
    return lines


class Claim(Verb):
    name = "claim"
    summary = "claim files of this repository, so other sessions are told before editing them"
    help = (
        "Claim paths of the repository you are in (relative to its top; globs such as "
        "src/api/** allowed): another session's edit of a claimed file is held back once "
        "with your name, focus and note. --for sets how long (default 2h, at most 24h)."
    )

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", metavar="PATH", help="a file, directory or glob")
        parser.add_argument(
            "--for", dest="duration", type=types.duration_arg, metavar="DURATION",
            help="how long, e.g. 90m, 2h (default 2h, at most 24h)",
        )  # fmt: skip
        parser.add_argument("--note", help="a few words for whoever is held back")
        add_json_flag(parser)

    def arguments(self, options):
        place = where()
        if place is None:
            raise UsageError(NOT_IN_A_REPO)
        return {
            "repo": place.common,
            "paths": relative_paths(options.paths, place),
            "for": options.duration,
            "note": options.note,
        }

    def show(self, result, options, out: Output):
        if options.json:
            out.emit_json(result)
            return
        out.say(
            f"{result['seat']} claims {', '.join(result['claimed'])} until "
            f"{formats.local_time(result['until'])}"
        )
        if result["others"]:
            out.say("Also claimed by others (they are told of yours when they edit):")
            for line in show_claims(result["others"]):
                out.say(line)


class Release(Verb):
    name = "release"
    summary = "end this seat's file claims"
    help = (
        "Release claimed paths of the repository you are in; no PATH releases every claim "
        "this seat holds in it (outside any repository: everywhere)."
    )

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="*", metavar="PATH")
        add_json_flag(parser)

    def arguments(self, options):
        place = where()
        if place is None and options.paths:
            raise UsageError(NOT_IN_A_REPO)
        paths = relative_paths(options.paths, place) if place is not None else []
        return {"repo": place.common if place else None, "paths": paths}

    def show(self, result, options, out: Output):
        if options.json:
            out.emit_json(result)
        elif result["released"]:
            out.say(f"{result['seat']} released {', '.join(result['released'])}")
        else:
            out.say(f"{result['seat']} held no such claim: nothing released")


VERBS = [Claim(), Release()]
