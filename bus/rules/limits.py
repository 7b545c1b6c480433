"""The words, windows and limits every rule is written in."""

from __future__ import annotations

from datetime import timedelta

TYPES = ("QUESTION", "ANSWER", "FACT", "REQUEST")


PHASES = ("explore", "plan", "apply", "verify", "blocked")


LIVE, UNKNOWN, GONE = "live", "unknown", "gone"


LIVENESS = (LIVE, UNKNOWN, GONE)


# Who sits in a seat: the agent CLIs that check in through their hooks or `salon mcp`,
# and a person (a staff user at the person's page or `salon top`).
CLAUDE, CODEX, GEMINI, OPENCODE, PERSON = "claude", "codex", "gemini", "opencode", "person"
AGENT_CLIENTS = (CLAUDE, CODEX, GEMINI, OPENCODE)
CLIENTS = (*AGENT_CLIENTS, PERSON)
# The clients whose idle session nothing can start a turn in (Codex CLI's `codex exec`,
# and its interactive sessions until salon speaks to its app-server; Gemini CLI, which
# has no way in between turns; OpenCode, whose plugin starts a turn only as one ends):
# a claim on such a seat is told at its next turn (a prompt, a tool's result, or the end
# of a turn), never while it waits.
TOLD_AT_NEXT_TURN = (CODEX, GEMINI, OPENCODE)


LIVE_WINDOW = timedelta(minutes=2)


UNKNOWN_WINDOW = timedelta(minutes=30)


STALE_FOCUS = timedelta(hours=4)


SIBLING_WINDOW = timedelta(minutes=60)


MAX_CONTENT_BYTES = 64 * 1024


MAX_META_KEYS = 32


# Limits: meta travels with every push and every read; it is for labels, not payloads.
MAX_META_BYTES = 16 * 1024


MAX_META_DEPTH = 8


MAX_ADDRESSEES = 32


MAX_FOCUS_FILES = 50


MAX_FOCUS_PATH_CHARS = 256


MAX_NAME_CHARS = 64


# Session ids are UUIDs or our own random ids; 128 leaves room without letting
# a hostile hook payload grow a seat name without bound.
MAX_SESSION_CHARS = 128


MIN_CLAIMED_SESSION_CHARS = 16


MAX_FOCUS_CHARS = 500


# Types that are a claim on attention even when broadcast (decide_wake).
CLAIM_TYPES = ("QUESTION", "REQUEST")


# The reasons decide_wake can give, so metrics and tests can enumerate them.
REASONS = ("sender", "not_addressed", "quiet", "addressed", "reply", "claim", "not_a_claim")
