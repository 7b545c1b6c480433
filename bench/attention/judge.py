"""The stub triage judge of the attention benchmark: answers from the day's labels.

Run as AGENT_SALON_TRIAGE_CMD=`python bench/attention/judge.py DAY.json [--wrong 0.1]`.
It reads the one JSON document the bus gives a judge on stdin and answers `yes` or `no`:

* letterbox and safety net ("is this entry for this seat?"): yes when the day labels the
  entry as owed to the seat's persona;
* gate ("should this request wake a person?"): yes when the day owes it to anyone.

`--seats PATH` names seats the day cannot (a Codex or Gemini session's, named after the
id its CLI gave it): a JSON object, seat name → persona, read at each call; `agent#?`
names the persona whose session of that agent is starting, its seat not known yet (its
first turn's hooks are judged before the CLI has told the replay its id).

`--wrong F` flips the answer for a fraction F of the (entry, seat, question) triples,
chosen by a hash, so the same triples are wrong on every run; `--fail F` gives no clear
answer ("maybe") for such a fraction instead, as a judge that times out or rambles.
Standard library only, and no import of the project: the hooks and `salon wait` start it
often.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys

TAG = re.compile(r"\[(d\d+)\]")


def labels(day: dict) -> tuple[dict[str, list[str]], list[tuple[str, list[str]]], dict]:
    """(tag → owed personas, [(derived marker, owed)], seat name → persona)."""
    owed, derived = {}, []
    for step in day["steps"]:
        if "tag" in step:
            owed[step["tag"]] = step["owed"]
        if "derived" in step:
            derived.append((step["derived"]["marker"], step["derived"]["owed"]))
    seats = {
        f"{info['agent']}#{session[:8]}": persona
        for persona, info in day["personas"].items()
        for session in info["sessions"]
    }
    return owed, derived, seats


def verdict(document: dict, day: dict, aliases: dict | None = None) -> bool:
    owed, derived, seats = labels(day)
    seats.update(aliases or {})
    half = document.get("half", "")
    content = (document.get("entry") or document.get("request") or {}).get("content", "")
    found = TAG.search(content)
    if found:
        owed_to = owed.get(found.group(1), [])
    else:
        owed_to = next((o for marker, o in derived if marker in content), None)
        if owed_to is None:  # nothing the day wrote: as a careful judge, let it through
            return half != "net"
    if half == "gate":
        return bool(owed_to)
    name = document.get("seat", {}).get("name", "")
    # A seat not named yet: the session its agent is starting ("agent#?" in --seats).
    persona = seats.get(name) or (aliases or {}).get(f"{name.partition('#')[0]}#?", "")
    return persona in owed_to


def wrong(document: dict, fraction: float) -> bool:
    if fraction <= 0:
        return False
    content = (document.get("entry") or document.get("request") or {}).get("content", "")
    found = TAG.search(content)
    key = "|".join(
        (
            document.get("half", ""),
            found.group(1) if found else content[:80],
            document.get("seat", {}).get("name", ""),
        )
    )
    bucket = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % 1000
    return bucket < fraction * 1000


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: judge.py DAY.json [--wrong F] [--fail F]", file=sys.stderr)
        return 2
    flip = float(argv[argv.index("--wrong") + 1]) if "--wrong" in argv else 0.0
    fail = float(argv[argv.index("--fail") + 1]) if "--fail" in argv else 0.0
    with open(argv[0]) as handle:
        day = json.load(handle)
    aliases = {}
    if "--seats" in argv:  # seat name → persona, for seats named by their CLI (mixed)
        try:
            with open(argv[argv.index("--seats") + 1]) as handle:
                aliases = json.load(handle)
        except (OSError, ValueError):
            aliases = {}
    document = json.load(sys.stdin)
    answer = verdict(document, day, aliases)
    if wrong(document, fail):
        print("maybe")
        return 0
    if wrong(document, flip):
        answer = not answer
    print("yes" if answer else "no")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
