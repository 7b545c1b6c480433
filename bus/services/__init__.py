"""The bus's operations: the only code that writes bus rows, split by noun.

* claims: file claims, and the edits they hold back once;
* seats: check-in, liveness evidence, focus, quiet, the agents projection, prune;
* rooms: rooms and memberships;
* entries: sending (the entry and its wake decisions in one transaction);
* reading: inbox, peek, history, unread counts;
* telling: the per-seat ledger's claims — pushes, and the tellings of wait, the
  Monitor and the Stop hook;
* tokens: bearer tokens;
* triage: the letterbox and the safety net (a judge command on the telling path);
* requests: cross-project requests — where an agent's policy is, what it decides;
* serving: cross-project requests settled — served, denied, gated, or fallen to wake.
* search: the full-text search of entries (reads only).

Every adapter calls these keyword-only verbs; the rules they apply live in bus.rules and
the shapes they answer with in bus.wire. A refusal is a bus.rules.RuleError whose
message says what was wrong and how to fix it. New entries ring bus.bell on commit.
"""

# The nouns, reachable as services.<noun>.<verb> from a plain `from bus import services`.
from bus.services import (
    claims,
    entries,
    reading,
    requests,
    rooms,
    search,
    seats,
    serving,
    telling,
    tokens,
    triage,
)

__all__ = [
    "claims",
    "entries",
    "reading",
    "requests",
    "rooms",
    "search",
    "seats",
    "serving",
    "telling",
    "tokens",
    "triage",
]
