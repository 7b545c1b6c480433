"""A project's policy for cross-project requests: which asks its own code answers, which
a person decides, and which it declines.

A request written with an ask key (`status:db`) is evaluated in the receiving project,
against that project's own `.agent-salon/policy.toml`, tracked in its repository so that
what it releases is decided in review::

    [[grant]]
    ask = "status:*"                       # segments; * is exactly one well-formed segment
    to = ["consumer-b", "qa@macmini"]      # bare name: that agent's LOCAL writers only
    since = 2026-11-20                     # a TOML date: when it was written
    until = 2027-01-31                     # optional
    serve = ["scripts/status.sh", "{2}"]   # argv in the project root, no shell
    # or, instead of serve:  verdict = "gate" | "wake" | "deny"

Pure like bus.rules: the ask key, the writer's seat name, the policy's text and the time
in; a verdict, the reason the asker is shown and (to serve) the command line out. No
Django, no file, no clock of its own: bus.services.requests reads the file, an adapter
runs the command.

The decisions, in the order `evaluate` takes them:

* No ask key (free text) → wake: free text is for a person. No policy file → wake: the
  project has not opted in, and behaves exactly as before.
* A policy that cannot be read or is invalid (TOML syntax, an unknown key, a value of the
  wrong kind, both `serve` and `verdict` or neither, a pattern or a `to` name that can
  never match, a placeholder the pattern cannot fill, a program outside the project) →
  wake, serving nothing, the reason naming the first problem's line. Data release fails
  closed, attention fails open.
* A key that is not well-formed (bus.rules.ask_key_problem: `..`, `/`, a NUL, upper
  case …) is covered by nothing: a local writer never gets one past the writer's check, so
  it was landed from elsewhere, and a probe is never answered with a denial (a denial
  would confirm what it probed) → wake.
* Grants are read in file order; the first whose pattern matches the key, whose `to`
  reaches the writer and which is in date decides: `serve` → serve, or its `verdict`
  (gate, wake, deny). A grant out of date is passed over, so a renewed grant may follow
  the old one.
* A grant for the key and the writer, none of them in date → deny, saying when it
  expired (or when it begins).
* A grant for the key that reaches other writers only (a remote device on a bare-name
  grant) → deny, naming the key and the writer.
* Nothing covers the key → wake.

What the words of a grant mean:

* A pattern has 1 to 4 segments like a key; `*` stands for exactly one well-formed
  segment, never for several and never for none.
* `to`: a bare name (`consumer-b`) reaches that agent's writers on this machine only
  (its seats and its bare name, never `consumer-b@anything`); `name@device` reaches the
  writers of that one remote device (`consumer-b@mac-mini#4289030d`). Nothing else: there
  is no wildcard writer.
* Dates are days in UTC, checked at evaluation time. A grant holds from the start of its
  `since` through the whole of its last day, which is its `until`, and never later than
  `since` + 90 days (a grant longer than that ends there; `salon policy check` says so).
* `serve` is an argument list. Its program (the first item) is a bare command name looked
  up on PATH (`git`), or a path inside the project, relative to its root
  (`scripts/status.sh`): an absolute path or one with a `..` part is invalid, and the
  program never holds a placeholder (the asker never picks what runs). `{n}` in the other
  arguments, even inside one (`--name={2}`), is replaced by the key's nth segment (from
  1), which is well-formed by then; any other brace is kept as written.
"""

from __future__ import annotations

import re
import tomllib
from collections import namedtuple
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta

from bus import rules

POLICY_FILE = ".agent-salon/policy.toml"
SERVE, GATE, WAKE, DENY = "serve", "gate", "wake", "deny"
VERDICTS = (SERVE, GATE, WAKE, DENY)
WRITTEN_VERDICTS = (GATE, WAKE, DENY)  # what `verdict = "…"` may say
MAX_GRANT_DAYS = 90
# A policy is a page of grants; a file far larger is not one, and is not parsed.
MAX_POLICY_BYTES = 256 * 1024
MAX_SERVE_ARGS = 64
GRANT_KEYS = ("ask", "to", "since", "until", "serve", "verdict")
# Serving: what the command may print, and the environment it runs with (nothing else of
# the server's own: no secret, no DATABASE_URL, no token reaches it).
SERVE_OUTPUT_CAP = 16 * 1024
SERVE_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
WILDCARD = "*"

_PLACEHOLDER_RE = re.compile(r"\{([0-9]+)\}")
# A TOML syntax error's position, as tomllib (Python 3.11-3.13) writes it into its message.
_AT_LINE_RE = re.compile(r"\s*\(at line ([0-9]+), column [0-9]+\)|\s*\(at end of document\)")
# The light scan that finds the line of a grant and of each of its keys (tomllib gives
# lines for syntax errors only): table headers, and `key =` / `"key" =` / `key.sub =`.
_HEADER_RE = re.compile(r"\s*(\[\[?)\s*([A-Za-z0-9_.\-\"' ]+?)\s*\]\]?\s*(#.*)?")
_KEY_RE = re.compile(r'\s*(?:([A-Za-z0-9_-]+)|"([^"\\]*)"|\'([^\']*)\')\s*[.=]')


class Problem(namedtuple("Problem", "line text")):
    """What is wrong with a policy, and on which line (int, or None: the whole file)."""

    __slots__ = ()

    def __str__(self) -> str:
        return f"line {self.line}: {self.text}" if self.line else self.text


class Grant(namedtuple("Grant", "line ask pattern to since until serve verdict lines")):
    """One `[[grant]]`: its header's line, the pattern as written and as segments, the
    writers it reaches (a tuple of names), since and until (dates; until may be None),
    serve (a tuple of arguments, or None) or verdict (str, or None), and the line of each
    key it holds."""

    __slots__ = ()

    @property
    def last_day(self) -> date:
        """The last day (UTC) the grant holds: its until, never later than since + 90 days."""
        cap = self.since + timedelta(days=MAX_GRANT_DAYS)
        return cap if self.until is None or self.until > cap else self.until

    def covers(self, segments: Sequence[str]) -> bool:
        """The pattern matches a well-formed key's segments."""
        return len(segments) == len(self.pattern) and all(
            want in (WILDCARD, got) for want, got in zip(self.pattern, segments, strict=True)
        )

    def reaches(self, writer: str) -> str | None:
        """The `to` name that reaches this writer (a seat name), or None."""
        agent = rules.agent_of_seat(writer)
        return agent if agent in self.to else None

    def holds_on(self, day: date) -> bool:
        return self.since <= day <= self.last_day


class Policy(namedtuple("Policy", "grants problems")):
    """A parsed policy: its grants in file order, and what is wrong with it (a policy
    with any problem is invalid as a whole: it serves nothing)."""

    __slots__ = ()

    @property
    def valid(self) -> bool:
        return not self.problems


class Verdict(namedtuple("Verdict", "verdict reason argv line", defaults=(None, None))):
    """What the policy decides for one request: serve, gate, wake or deny; the reason the
    asker is shown; to serve, the command line with its placeholders filled (a tuple);
    the line of the grant that decided (None when no grant did)."""

    __slots__ = ()


# --- reading a policy -------------------------------------------------------------


def unreadable(why: str) -> Policy:
    """The policy of a file that exists but cannot be read: `why` says what is wrong
    ("Permission denied", "it is not a regular file")."""
    return Policy((), (Problem(None, why),))


def parse(text: str | bytes) -> Policy:
    """The policy a file's content holds, with every problem found (each naming its line)."""
    if isinstance(text, bytes):
        if len(text) > MAX_POLICY_BYTES:
            return too_large()
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line = text.count(b"\n", 0, exc.start) + 1
            return Policy((), (Problem(line, "the file is not UTF-8 text"),))
    elif len(text.encode("utf-8", "surrogatepass")) > MAX_POLICY_BYTES:
        return too_large()
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return Policy((), (_syntax_problem(exc),))
    except RecursionError:  # thousands of nested arrays: not a page of grants
        return Policy((), (Problem(None, "the file is nested too deeply to be a policy"),))
    layout = _Layout(text)
    problems: list[Problem] = []
    for key in document:
        if key != "grant":
            problems.append(
                Problem(
                    layout.top_line(key),
                    f"unknown key {_shown(key)}: a policy holds only [[grant]] tables",
                )
            )
    tables = document.get("grant", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        problems.append(Problem(layout.top_line("grant"), "write each grant as a [[grant]] table"))
        tables = []
    grants = []
    for index, table in enumerate(tables):
        grant, found = _grant(table, layout.grant_lines(index, len(tables)))
        problems += found
        if grant is not None:
            grants.append(grant)
    return Policy(tuple(grants), tuple(problems))


def lint(policy: Policy, today: date) -> list[Problem]:
    """What `salon policy check` says beyond the problems that make a policy invalid:
    a grant longer than 90 days (it ends after 90), one that has ended, one not begun."""
    found = []
    for grant in policy.grants:
        if grant.until is not None and grant.until > grant.last_day:
            found.append(
                Problem(
                    grant.lines.get("until", grant.line),
                    f"the grant for {_shown(grant.ask)} runs from {grant.since} until "
                    f"{grant.until}, longer than {MAX_GRANT_DAYS} days: it ends on "
                    f"{grant.last_day}; set until to that date at the latest",
                )
            )
        if grant.last_day < today:
            found.append(
                Problem(
                    grant.line,
                    f"the grant for {_shown(grant.ask)} expired on {grant.last_day}: it can "
                    "never match again; renew it with a new since, or remove it",
                )
            )
        elif grant.since > today:
            found.append(
                Problem(
                    grant.lines.get("since", grant.line),
                    f"the grant for {_shown(grant.ask)} begins on {grant.since}, after today "
                    f"({today}, UTC): until then it matches nothing",
                )
            )
    return found


# --- evaluating a request ---------------------------------------------------------


def evaluate(
    key: str | None, writer: str, policy: Policy | str | bytes | None, now: datetime
) -> Verdict:
    """The verdict of the receiving project's policy on one request, in the order the
    table of verdicts reads: free text, and a request the policy cannot judge, wake
    (`_unjudged`); else the first grant that covers the key, reaches the writer and holds
    today decides (`_decided`); else a grant for the key that does not reach this writer,
    or has ended, denies (`_denied`); else nothing covers the key, and it wakes.

    `key`: the request's ask key as it arrived (None or empty: free text); `writer`: the
    seat name of whoever wrote it (`consumer-b#3f9c1a20`, `consumer-b@mac-mini#4289030d`);
    `policy`: the parsed policy, or the file's content, or None (no file); `now`: an
    aware datetime, compared in UTC."""
    if now.tzinfo is None:
        raise ValueError("evaluate needs an aware datetime (UTC)")
    if key is None or key == "":
        return Verdict(WAKE, "free text (no ask key) is for a person")
    if isinstance(policy, str | bytes):
        policy = parse(policy)
    unjudged = _unjudged(key, policy)
    if unjudged is not None:
        return unjudged
    segments = key.split(":")
    today = now.astimezone(UTC).date()
    covering = [grant for grant in policy.grants if grant.covers(segments)]
    for grant in covering:
        name = grant.reaches(writer)
        if name is not None and grant.holds_on(today):
            return _decided(grant, name, key, segments)
    return _denied(key, writer, covering, today) or Verdict(WAKE, _uncovered(key))


def _uncovered(key: str) -> str:
    return f"nothing in the policy covers {rules.shown_ask(key)}"


def _unjudged(key: str, policy: Policy | None) -> Verdict | None:
    """Attention fails open: no policy, a policy that cannot be read, and a key that is
    not well-formed (a probe is never answered with a denial) all wake."""
    if policy is None:
        return Verdict(WAKE, "no policy: this project has not opted in")
    if not policy.valid:
        return Verdict(
            WAKE,
            f"the policy cannot be read ({policy.problems[0]}): nothing is served until it "
            "is fixed",
        )
    if rules.ask_key_problem(key) is not None:
        return Verdict(WAKE, _uncovered(key))
    return None


def _denied(key: str, writer: str, covering: list[Grant], today: date) -> Verdict | None:
    """Data release fails closed: the key is granted, but not to this writer today. A
    writer's own grant that has ended (or not begun) is named; else the first grant of
    the key."""
    if not covering:
        return None
    shown = rules.shown_ask(key)
    for grant in covering:
        if grant.reaches(writer) is None:
            continue
        if grant.since > today:
            return Verdict(
                DENY, f"your grant for {shown} begins on {grant.since}", None, grant.line
            )
        why = f"your grant for {shown} expired on {grant.last_day}"
        return Verdict(DENY, why, None, grant.line)
    return Verdict(DENY, f"no grant reaches {shown} for {writer}", None, covering[0].line)


def _decided(grant: Grant, name: str, key: str, segments: list[str]) -> Verdict:
    shown = rules.shown_ask(key)
    if grant.serve is not None:
        argv = tuple(_fill(argument, segments) for argument in grant.serve)
        return Verdict(SERVE, f"granted to {name} until {grant.last_day}", argv, grant.line)
    reasons = {
        GATE: f"the policy gates {shown} for {name}: a judge decides whether it wakes a person",
        WAKE: f"the policy asks a person to answer {shown}",
        DENY: f"the policy declines {shown} for {name}",
    }
    return Verdict(grant.verdict, reasons[grant.verdict], None, grant.line)


def _fill(argument: str, segments: Sequence[str]) -> str:
    return _PLACEHOLDER_RE.sub(lambda match: segments[int(match.group(1)) - 1], argument)


def serve_environment(environ: Mapping[str, str], *, key: str, asker: str) -> dict[str, str]:
    """The whole environment a serve command runs with: PATH, HOME and LANG from the
    server's own `environ` (a default for each one unset), the ask key and the asker's
    seat name."""
    return {
        "PATH": environ.get("PATH") or SERVE_DEFAULT_PATH,
        "HOME": environ.get("HOME") or "/",
        "LANG": environ.get("LANG") or "C.UTF-8",
        "AGENT_SALON_ASK": key,
        "AGENT_SALON_ASKER": asker,
    }


# --- one grant --------------------------------------------------------------------


def _grant(table: dict, lines: _GrantLines) -> tuple[Grant | None, list[Problem]]:
    """One `[[grant]]` table, checked key by key: every problem found, each at its line."""
    problems: list[Problem] = []

    def problem(key: str | None, text: str) -> None:
        problems.append(Problem(lines.of(key), text))

    _check_keys(table, problem)
    pattern = _pattern(table.get("ask"), lambda text: problem("ask", text))
    to = _writers(table.get("to"), lambda text: problem("to", text))
    since = _date(table, "since", lambda text: problem("since", text))
    until = _date(table, "until", lambda text: problem("until", text))
    if isinstance(since, date) and isinstance(until, date) and until < since:
        problem("until", f"the grant ends ({until}) before it begins ({since}): it never holds")
    serve, verdict = _action(table, pattern, problem)
    if problems:
        return None, problems
    ask = table["ask"]
    return Grant(lines.header, ask, pattern, to, since, until, serve, verdict, lines.keys), []


def _check_keys(table: dict, problem) -> None:
    """Unknown keys, and the three every grant needs."""
    for key in table:
        if key not in GRANT_KEYS:
            problem(
                key,
                f"unknown key {_shown(key)} in a grant: a grant holds ask, to, since, "
                "until (optional), and serve or verdict",
            )
    for key in ("ask", "to", "since"):
        if key not in table:
            problem(None, f"the grant has no {key}: every grant needs ask, to and since")


def _action(table: dict, pattern, problem) -> tuple[tuple[str, ...] | None, str | None]:
    """What the grant does: exactly one of serve (a command) and verdict."""
    serve, verdict = table.get("serve"), table.get("verdict")
    if serve is not None and verdict is not None:
        problem("verdict", "the grant has both serve and verdict: keep one")
    elif serve is None and verdict is None:
        problem(None, 'the grant has neither serve nor verdict: add serve = [...] or verdict = "…"')
    elif serve is not None:
        serve = _serve(serve, pattern, lambda text: problem("serve", text))
    elif verdict not in WRITTEN_VERDICTS:
        problem(
            "verdict",
            f"verdict {_shown(verdict)} is not one of gate, wake, deny "
            "(to answer by a command, write serve = [...] instead)",
        )
    return serve, verdict


def _pattern(value: object, problem) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, str):
        problem(f'ask must be text, such as ask = "status:*", not {_kind(value)}')
        return None
    segments = value.split(":")
    if len(segments) > rules.MAX_ASK_SEGMENTS:
        problem(
            f"the pattern {_shown(value)} has {len(segments)} segments and a key has at most "
            f"{rules.MAX_ASK_SEGMENTS}: it can never match"
        )
        return None
    for segment in segments:
        why = None if segment == WILDCARD else rules.ask_segment_problem(segment)
        if why is not None:
            problem(
                f"the pattern {_shown(value)} can never match a key ({why}); a pattern is "
                'segments like a key\'s, joined by ":", where * stands for exactly one segment'
            )
            return None
    return tuple(segments)


def _writers(value: object, problem) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        problem('to must be a list of writers, such as to = ["consumer-b", "qa@macmini"]')
        return None
    names = []
    for name in value:
        if not isinstance(name, str):
            problem(f"a writer in to must be a name (text), not {_kind(name)}")
            return None
        why = _writer_problem(name)
        if why is not None:
            problem(
                f"the writer {_shown(name)} can never match ({why}); name an agent "
                "(consumer-b: its writers on this machine) or agent@device (that device's)"
            )
            return None
        names.append(name)
    return tuple(names)


def _writer_problem(name: str) -> str | None:
    agent, at, device = name.partition("@")
    try:
        rules.validate_name(agent, "agent")
        if at:
            rules.validate_name(device, "device")
    except rules.RuleError as exc:
        return str(exc)
    if "@" in device or "#" in device:
        return 'a device name holds no "@" and no "#"'
    return None


def _date(table: dict, key: str, problem) -> date | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, datetime) or not isinstance(value, date):
        problem(
            f"{key} must be a date, such as {key} = 2026-11-20 (no quotes, no time), "
            f"not {_kind(value)}"
        )
        return None
    return value


_SERVE_EXAMPLE = 'such as serve = ["scripts/status.sh", "{2}"]'


def _serve(value: object, pattern: tuple[str, ...] | None, problem) -> tuple[str, ...] | None:
    """A serve command, checked: its arguments, its program, its placeholders. The first
    problem found is reported, and the grant serves nothing."""
    why = _arguments_problem(value) or _program_problem(value[0])
    why = why or _placeholders_problem(value[1:], pattern)
    if why is not None:
        problem(why)
        return None
    return tuple(value)


def _arguments_problem(value: object) -> str | None:
    if not isinstance(value, list) or not value:
        return f"serve must be a list of the command's arguments, {_SERVE_EXAMPLE}"
    if len(value) > MAX_SERVE_ARGS:
        return f"serve has {len(value)} arguments, over the limit of {MAX_SERVE_ARGS}"
    for argument in value:
        if not isinstance(argument, str):
            return f"each argument of serve must be text, not {_kind(argument)}"
        if "\0" in argument:
            return "an argument of serve holds a NUL character, which no command can take"
    return None


def _program_problem(program: str) -> str | None:
    if not program:
        return f"the program of serve is empty: name it first, {_SERVE_EXAMPLE}"
    if _PLACEHOLDER_RE.search(program):
        return (
            f"the program of serve, {_shown(program)}, holds a placeholder: the asker would "
            "pick what runs; name the program itself and put {n} in its arguments"
        )
    outside = program_outside(program)
    return f"the program of serve, {_shown(program)}, {outside}" if outside else None


def _placeholders_problem(arguments: list[str], pattern: tuple[str, ...] | None) -> str | None:
    if pattern is None:
        return None
    for argument in arguments:
        for match in _PLACEHOLDER_RE.finditer(argument):
            n = int(match.group(1)) if len(match.group(1)) < 4 else 0
            if not 1 <= n <= len(pattern):
                return (
                    f"the placeholder {match.group(0)} names no segment of the pattern "
                    f"{_shown(':'.join(pattern))} (it has {len(pattern)}: {{1}} to "
                    f"{{{len(pattern)}}})"
                )
    return None


def program_outside(program: str) -> str | None:
    """Why a serve program, as written, is outside the project (or None): an absolute
    path, or a `..` part. Where it runs, the path is also resolved (links followed) and
    must stay inside (bus.services.requests.program_path)."""
    if program.startswith("/"):
        return "is an absolute path, outside the project: give a path relative to its root"
    if ".." in program.split("/"):
        return 'climbs out of the project with "..": give a path inside it'
    return None


# --- where things are in the file -------------------------------------------------


class _GrantLines(namedtuple("_GrantLines", "header keys")):
    """The line of a grant's header and of each key it holds (keys absent: unknown)."""

    __slots__ = ()

    def of(self, key: str | None) -> int | None:
        return self.keys.get(key, self.header) if key else self.header


class _Layout:
    """Lines found by a light scan of the text, beside what tomllib parsed: the header of
    each `[[grant]]`, the keys under it, and the top-level keys and tables.

    A policy is short and plain, so the scan reads lines as they look; where it cannot
    be sure (a header or key inside a multi-line string), a problem is still reported,
    only without a line (the number of headers must equal the number of grants)."""

    def __init__(self, text: str):
        self.top: dict[str, int] = {}
        self.grants: list[tuple[int, dict[str, int]]] = []
        section: dict[str, int] | None = self.top
        for number, line in enumerate(text.splitlines(), start=1):
            header = _HEADER_RE.fullmatch(line)
            if header and line.lstrip().startswith("["):
                name = header.group(2).strip().strip("\"'")
                if header.group(1) == "[[" and name == "grant":
                    keys: dict[str, int] = {}
                    self.grants.append((number, keys))
                    section = keys
                else:
                    self.top.setdefault(name.split(".")[0], number)
                    section = None
                continue
            key = _KEY_RE.match(line)
            if key and section is not None:
                section.setdefault(next(g for g in key.groups() if g is not None), number)

    def top_line(self, key: str) -> int | None:
        return self.top.get(key)

    def grant_lines(self, index: int, count: int) -> _GrantLines:
        if len(self.grants) != count:
            return _GrantLines(None, {})
        header, keys = self.grants[index]
        return _GrantLines(header, keys)


def _syntax_problem(exc: tomllib.TOMLDecodeError) -> Problem:
    message = str(exc)
    line = getattr(exc, "lineno", None)  # Python 3.14 gives it
    found = _AT_LINE_RE.search(message)
    if found:
        line = line or (int(found.group(1)) if found.group(1) else None)
        message = message[: found.start()] + message[found.end() :]
    return Problem(line, f"not valid TOML: {message.strip()}")


def too_large() -> Policy:
    """The policy of a file over MAX_POLICY_BYTES (read no further than the limit)."""
    text = f"the file is over the limit of {MAX_POLICY_BYTES} bytes: a policy is a page of grants"
    return Policy((), (Problem(None, text),))


def _shown(value: object) -> str:
    return rules.shown_ask(value) if isinstance(value, str) else repr(value)[:64]


def _kind(value: object) -> str:
    names = {str: "text", int: "a number", float: "a number", bool: "true/false"}
    names.update({list: "a list", dict: "a table", datetime: "a date and time", date: "a date"})
    return names.get(type(value), type(value).__name__)
