"""`salon stats [ROOM…] [--since 24h|7d] [--seats] [--json]`: what the bus cost, and
whether anyone was there to be woken.

The numbers are bus.stats.report (its docstring says where each one comes from); this
command only prints them. Reads only: no cursor moves, no seat is checked in. With
`--json`, stdout is the `salon.stats/1` document (keys pinned in docs-stats.md).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from bus.management import cli


def _n(value: int) -> str:
    return f"{value:,}"


def _reading(reading: dict) -> str:
    if not reading["entries"]:
        return "inbox handed out nothing"
    text = (
        f"inbox handed out {cli.plural(reading['entries'], 'entry', 'entries')}, "
        f"{_n(reading['chars'])} characters"
    )
    if reading["clipped"]:
        text += (
            f" ({_n(reading['clipped'])} clipped, {_n(reading['charsHeldBack'])} characters "
            "held back)"
        )
    else:
        text += " (none clipped)"
    return text


def _told(wake: dict) -> str:
    paths = [
        f"{_n(wake['pushed'])} pushed",
        f"{_n(wake['announced'])} announced",
        f"{_n(wake['turnsHeld'])} turns held",
    ]
    return (
        f"{_n(wake['decided'])} decided → {_n(wake['told'])} told ({' · '.join(paths)}) · "
        f"{_n(wake['notTold'])} not told"
    )


def _no_session(wake: dict, indent: str) -> str:
    n = wake["reachedNoSession"]
    if not n:
        return f"{indent}reached no session: 0"
    return (
        f"{indent}!!! {cli.plural(n, 'WAKE-UP', 'WAKE-UPS')} REACHED NO SESSION: judged worth "
        "waking, nobody listening (no stream, no salon wait, no Stop hook), never told !!!"
    )


def _block(title: str, numbers: dict) -> list[str]:
    decisions = numbers["decisions"]
    kinds = " · ".join(f"{kind} {_n(n)}" for kind, n in decisions["byKind"].items())
    reasons = " · ".join(
        f"{reason} {_n(n)}"
        for reason, n in sorted(decisions["byReason"].items(), key=lambda item: -item[1])
        if n
    )
    return [
        title,
        f"  entries    {_n(numbers['entries'])} stored · {_reading(numbers['reading'])}",
        f"  decisions  {_n(decisions['total'])}: {kinds}" + (f"  ({reasons})" if reasons else ""),
        f"  wake-ups   {_told(numbers['wakeUps'])}",
        _no_session(numbers["wakeUps"], "  "),
    ]


def _seat_line(seat: dict) -> str:
    wake = seat["wakeUps"]
    words = [f"wake-ups {_told(wake)}"]
    if wake["reachedNoSession"]:
        words.append(f"REACHED NO SESSION {_n(wake['reachedNoSession'])}")
    if seat["quieted"]:
        words.append(f"quieted {_n(seat['quieted'])}")
    words.append(_reading(seat["reading"]))
    name = seat["seat"] + (" (forgotten)" if seat["forgotten"] else "")
    return f"    {name}: " + " · ".join(words)


def format_report(document: dict, since: str) -> str:
    window, ledger = document["window"], document["ledger"]
    span = f"{cli.local_time(window['since'])} → {cli.local_time(window['until'])}, local time"
    lines = [f"salon stats for the last {since} ({span})"]
    if ledger["empty"]:
        lines.append(
            "The ledger has no records in this window: nothing was measured (which is not "
            f"a measured zero). It keeps {window['retentionDays']} days "
            "(AGENT_SALON_STATS_DAYS)."
        )
        return "\n".join(lines)
    lines.append(
        f"ledger: {cli.plural(ledger['records'], 'record')}, first "
        f"{cli.local_time(ledger['first'])}, last {cli.local_time(ledger['last'])} "
        f"(kept {window['retentionDays']} days)"
    )
    reach = datetime.fromisoformat(window["until"]) - datetime.fromisoformat(window["since"])
    if reach > timedelta(days=window["retentionDays"]):
        lines.append(
            f"(the window reaches further back than the {window['retentionDays']} days the "
            "ledger keeps: `salon prune` deleted what was older; entries are counted whole)"
        )
    for room in document["rooms"]:
        lines.append("")
        lines += _block(f"room {room['room']}", room)
        if "seats" in room:
            lines.append("  seats:" if room["seats"] else "  seats: none recorded")
            lines += [_seat_line(seat) for seat in room["seats"]]
    if len(document["rooms"]) > 1:
        lines.append("")
        lines += _block("all rooms", document["totals"])
    return "\n".join(lines)


class Command(cli.BusCommand):
    help = (
        "What the bus cost, and whether anyone was there to be woken: per room, entries "
        "and what inbox handed out, decisions by kind, wake-ups decided → pushed / "
        "announced / turns held, and the wake-ups that reached no session. Reads only."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "rooms", nargs="*", type=cli.room_arg, metavar="ROOM", help="only these rooms"
        )
        parser.add_argument(
            "--since",
            type=cli.duration_arg,
            default="24h",
            metavar="DURATION",
            help="how far back: 90m, 24h, 7d … (default 24h)",
        )
        parser.add_argument("--seats", action="store_true", help="break it down per seat")
        cli.add_json_flag(parser)

    def handle(self, *, rooms, since, seats, json, **options):
        from bus import stats

        document = stats.report(rooms=rooms, since=since, seats=seats)
        if json:
            self.emit_json(document)
        else:
            self.say(format_report(document, since))
