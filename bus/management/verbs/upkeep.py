"""prune, token, stats: keeping the store, its tokens, and its numbers."""

from __future__ import annotations

from datetime import datetime, timedelta

from bus.management.verbs import formats, types
from bus.management.verbs.base import Output, UsageError, Verb, add_json_flag


class Prune(Verb):
    name = "prune"
    summary = "forget long-gone seats and old stats rows"
    help = (
        "Forget seats that are gone and silent for N days (default 7), and delete the stats "
        "ledger's rows older than AGENT_SALON_STATS_DAYS (default 30). Entries are never "
        "touched. --dry-run lists them and writes nothing."
    )
    speaks_for_a_seat = False

    def add_arguments(self, parser):
        parser.add_argument(
            "--days",
            type=types.days_arg,
            default=7,
            metavar="N",
            help="silent for at least N days (default 7)",
        )
        parser.add_argument("--dry-run", action="store_true", help="list, write nothing")
        add_json_flag(parser)

    def arguments(self, options):
        return {"days": options.days, "dry_run": options.dry_run}

    def show(self, result, options, out: Output):
        if options.json:
            out.emit_json(result)
            return
        if not result["seats"]:
            out.say(f"no seat is gone and silent for {options.days} days")
        else:
            verb = "would forget" if options.dry_run else "forgot"
            seats = result["seats"]
            out.say(f"{verb} {formats.plural(len(seats), 'seat')}: {', '.join(seats)}")
        ledger = result["ledger"]
        rows = ledger["decisions"] + ledger["decisionCounts"] + ledger["readCounts"]
        if rows:
            verb = "would delete" if options.dry_run else "deleted"
            out.say(
                f"{verb} {formats.plural(rows, 'stats ledger row')} older than "
                f"{ledger['retentionDays']} days (AGENT_SALON_STATS_DAYS)"
            )


class Token(Verb):
    name = "token"
    summary = "issue, revoke or list bearer tokens"
    help = (
        "issue LABEL prints a new token (only its hash is stored); revoke LABEL revokes "
        "every token of LABEL; list [LABEL] shows labels with tokens."
    )
    speaks_for_a_seat = False

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["issue", "revoke", "list"])
        parser.add_argument("label", type=types.name_arg, nargs="?", help="the agent label")
        add_json_flag(parser)

    def arguments(self, options):
        if options.action != "list" and not options.label:
            raise UsageError(f"name the label: salon token {options.action} LABEL")
        return {"action": options.action, "label": options.label}

    def show(self, result, options, out: Output):
        label = options.label
        if options.action == "issue":
            text = result["token"]
            out.note(
                "salon token: store this token now; only its hash is kept. "
                f"Callers send it as 'Authorization: Bearer <token>' for {label}."
            )
        elif options.action == "revoke":
            text = f"revoked {formats.plural(result['revoked'], 'token')} of {label}"
        else:
            text = (
                "\n".join(
                    f"{t['label']}  {formats.plural(t['tokens'], 'token')} · "
                    f"newest {formats.local_time(t['newest'])}"
                    for t in result
                )
                or "no tokens issued"
            )
        if options.json:
            out.emit_json(result)
        else:
            out.say(text)


class Stats(Verb):
    name = "stats"
    summary = "what the bus cost, and who was there to be woken"
    help = (
        "What the bus cost, and whether anyone was there to be woken: per room, entries "
        "and what inbox handed out, decisions by kind, wake-ups decided → told (announced / "
        "turns held / at session start / by reading) and pushed, and the wake-ups that "
        "reached no session. Reads only."
    )
    speaks_for_a_seat = False

    def add_arguments(self, parser):
        parser.add_argument(
            "rooms", nargs="*", type=types.room_arg, metavar="ROOM", help="only these rooms"
        )
        parser.add_argument(
            "--since",
            type=types.duration_arg,
            default="24h",
            metavar="DURATION",
            help="how far back: 90m, 24h, 7d … (default 24h)",
        )
        parser.add_argument("--seats", action="store_true", help="break it down per seat")
        add_json_flag(parser)

    def arguments(self, options):
        return {"rooms": options.rooms, "since": options.since, "seats": options.seats}

    def show(self, document, options, out: Output):
        if options.json:
            out.emit_json(document)
        else:
            out.say(format_report(document, options.since))


# ---------------------------------------------------------------- the stats report


def _n(value: int) -> str:
    return f"{value:,}"


def _reading(reading: dict) -> str:
    if not reading["entries"]:
        return "inbox handed out nothing"
    text = (
        f"inbox handed out {formats.plural(reading['entries'], 'entry', 'entries')}, "
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
        f"{_n(wake['announced'])} announced",
        f"{_n(wake['turnsHeld'])} turns held",
        f"{_n(wake['toldAtStart'])} at session start",
        f"{_n(wake['toldByReading'])} by reading",
    ]
    return (
        f"{_n(wake['decided'])} decided → {_n(wake['told'])} told ({' · '.join(paths)}) · "
        f"{_n(wake['notTold'])} not told · {_n(wake['pushed'])} pushed"
    )


def _no_session(wake: dict, indent: str) -> str:
    n = wake["reachedNoSession"]
    if not n:
        return f"{indent}reached no session: 0"
    return (
        f"{indent}!!! {formats.plural(n, 'WAKE-UP', 'WAKE-UPS')} REACHED NO SESSION: judged worth "
        "waking, nobody listening (no stream, no salon wait, no Stop hook), never told !!!"
    )


def _triage(numbers: dict) -> str:
    triage = numbers["triage"]
    return (
        f"{_n(triage['letterbox'])} held back by the letterbox · {_n(triage['net'])} told "
        f"by the safety net · {_n(triage['letterboxFailed'])} letterbox failed"
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
        f"  judged     {_triage(numbers)}",
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


def _requests(asked: dict) -> str:
    text = (
        f"requests   {_n(asked['served'])} served · {_n(asked['gated'])} gated · "
        f"{_n(asked['denied'])} denied · {_n(asked['woken'])} woken → "
        f"{formats.plural(asked['turnsSaved'], 'turn')} saved"
    )
    if asked.get("pending"):
        text += f" ({_n(asked['pending'])} being answered)"
    return text


def format_report(document: dict, since: str) -> str:
    window, ledger = document["window"], document["ledger"]
    span = (
        f"{formats.local_time(window['since'])} → {formats.local_time(window['until'])}, local time"
    )
    lines = [f"salon stats for the last {since} ({span})"]
    asked = document.get("requests")
    if asked and any(asked.values()):
        lines.append(_requests(asked))
    if ledger["empty"]:
        lines.append(
            "The ledger has no records in this window: nothing was measured (which is not "
            f"a measured zero). It keeps {window['retentionDays']} days "
            "(AGENT_SALON_STATS_DAYS)."
        )
        return "\n".join(lines)
    lines.append(
        f"ledger: {formats.plural(ledger['records'], 'record')}, first "
        f"{formats.local_time(ledger['first'])}, last {formats.local_time(ledger['last'])} "
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


VERBS = [Prune(), Token(), Stats()]
