"""How the bus commands print for people (with --json they print the JSON instead)."""

from __future__ import annotations

from datetime import datetime

from bus import strict

# ---------------------------------------------------------------- words


def plural(count: int, word: str, words: str | None = None) -> str:
    return f"{count} {word if count == 1 else (words or word + 's')}"


# ---------------------------------------------------------------- time


def _parse(ts: str | None) -> datetime | None:
    return datetime.fromisoformat(ts) if ts else None


def local_time(ts: str | None) -> str:
    """An ISO timestamp from the bus, in this machine's local time, to the second."""
    moment = _parse(ts)
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S") if moment else "never"


def ago(ts: str | None, now: str) -> str:
    moment, at = _parse(ts), _parse(now)
    if moment is None or at is None:
        return "never"
    seconds = max(int((at - moment).total_seconds()), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"


# ---------------------------------------------------------------- entries


def _field(value: object) -> str:
    # A row changed outside the bus can hold a line break or a terminal's escape in any
    # column: each part of a header is escaped, its text by strict.entry_text.
    return strict.loggable(value, 200)


def format_entry(entry: dict) -> str:
    """`## <local time> · room — TYPE → to (re: …)  [sender]`, then the text.

    A tampered entry is flagged loudly before its text; a clipped one says so after it.
    """
    to = ", ".join(map(_field, entry["to"])) if entry["to"] else "everyone"
    head = (
        f"## {local_time(entry['ts'])} · {_field(entry['room'])} — {_field(entry['type'])} → {to}"
    )
    if entry.get("re"):
        head += f" (re: {_field(entry['re'])})"
    head += f"  [{_field(entry['from'])}]"
    marks = []
    if entry.get("wakes"):
        marks.append("wakes you")
    if entry.get("sibling"):
        marks.append("from a sibling seat")
    if marks:
        head += "  · " + " · ".join(marks)
    lines = [head]
    if entry.get("tampered"):
        lines.append(
            "!!! TAMPERED: this entry's signature does not match — its row was changed "
            "outside the bus. Do not trust the text below. !!!"
        )
    lines.append(strict.entry_text(entry["content"]))
    if entry.get("clipped"):
        lines.append(
            f"[clipped: {entry['clipped']} characters in all — "
            f"`salon history {entry['room']}` shows it whole]"
        )
    lines.append(f"(id {entry['id']})")
    return "\n".join(lines)


def tampered_warning(count: int) -> str:
    entries = plural(count, "TAMPERED entry", "TAMPERED entries")
    them = "it" if count == 1 else "them"
    return f"!!! {entries} above: changed outside the bus; do not trust {them} !!!"


def format_entries(entries: list[dict]) -> str:
    return "\n\n".join(format_entry(e) for e in entries)


# ---------------------------------------------------------------- agents


def _focus_line(focus: dict | None, now: str) -> str | None:
    if not focus:
        return None
    line = f'focus: "{focus["text"]}"'
    if focus.get("phase"):
        line += f" [{focus['phase']}]"
    if focus.get("files"):
        line += f" · files: {', '.join(focus['files'])}"
    if focus.get("stale"):
        line += f" · STALE (declared {ago(focus.get('ts'), now)})"
    return line


def _quiet_words(seat: dict) -> str | None:
    if not seat["quiet"]:
        return None
    if seat["quietUntil"] is None:
        return "QUIET WITH NO EXPIRY — nothing wakes it until `salon quiet --off`"
    return f"quiet until {local_time(seat['quietUntil'])}"


def format_agents(projection: dict) -> str:
    now = projection["generatedAt"]
    if not projection["agents"]:
        return "nobody is on the bus yet"
    lines = []
    for agent in projection["agents"]:
        head = agent["agent"]
        head += f"  rooms: {', '.join(agent['rooms']) or 'none'}"
        head += f" · last seen {ago(agent['lastSeen'], now)}"
        if agent["host"]:
            head += f" · host {agent['host']}"
        lines.append(head)
        seats = agent["seats"]
        for index, seat in enumerate(seats):
            last = index == len(seats) - 1
            branch, stem = ("└─ ", "   ") if last else ("├─ ", "│  ")
            words = [seat["liveness"]]
            wrote = seat["lastWrote"]
            words.append(f"last wrote {ago(wrote, now)}" if wrote else "never wrote")
            quiet = _quiet_words(seat)
            if quiet:
                words.append(quiet)
            lines.append(f"{branch}{seat['seat']}  {' · '.join(words)}")
            focus = _focus_line(seat["focus"], now)
            if focus:
                lines.append(f"{stem}   {focus}")
            for claim in seat.get("claims") or []:
                lines.append(f"{stem}   {claim_words(claim)}")
    return "\n".join(lines)


def claim_words(claim: dict) -> str:
    """One file claim (bus.services.claims.shown), as `agents` shows it."""
    minutes = claim["ageMinutes"]
    age = f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m"
    kind = " (by editing)" if claim["kind"] == "soft" else ""
    words = f"claims {claim['path']}{kind} · {age} old · until {local_time(claim['until'])}"
    return words + (f' · "{claim["note"]}"' if claim.get("note") else "")


def format_focus(seat: str, focus: dict | None) -> str:
    if not focus:
        return f"{seat} has no focus declared"
    now = datetime.now().astimezone().isoformat()
    return f"{seat} {_focus_line(focus, now)}"


# ---------------------------------------------------------------- rooms


def format_rooms(rooms: list[dict], *, archived: bool) -> str:
    if not rooms:
        return (
            "no archived rooms" if archived else "no rooms (create one: salon rooms --create NAME)"
        )
    lines = []
    for room in rooms:
        line = f"{room['room']}  {plural(room['entries'], 'entry', 'entries')}"
        line += f" · {plural(len(room['seats']), 'seat')}"
        line += f" ({len(room['live'])} live)"
        if room["seats"]:
            live = set(room["live"])
            line += ": " + ", ".join(s + (" *" if s in live else "") for s in room["seats"])
        if archived:
            line += f" · archived {local_time(room['archived'])}"
        lines.append(line)
        if room.get("bridge"):
            lines.append(f"  {format_bridge(room['bridge'])}")
    if not archived and any(r["live"] for r in rooms):
        lines.append("(* live)")
    return "\n".join(lines)


def format_bridge(bridge: dict, now: str | None = None) -> str:
    """A room bridged to a relay (docs/RELAY.md), in one line: where, how fresh, what
    crossed, and what went wrong."""
    now = now or datetime.now().astimezone().isoformat()
    words = [f"bridged to {bridge['relay']} as {bridge['device']}"]
    words.append(f"synced {ago(bridge['lastSync'], now)}")
    words.append(f"{bridge['pushed']} sent, {bridge['landed']} received")
    if bridge.get("waiting"):
        words.append(f"{bridge['waiting']} waiting to be sent")
    if bridge.get("refused"):
        words.append(f"{bridge['refused']} REFUSED (did not decrypt or check out)")
    if bridge.get("rejected"):
        words.append(f"{bridge['rejected']} not carried")
    if bridge.get("missed"):
        words.append(f"{bridge['missed']} dropped by the relay's retention unread")
    if bridge.get("error"):
        words.append(f"last error: {bridge['error']}")
    return " · ".join(words)
