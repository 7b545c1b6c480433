"""A project's policy for cross-project requests, and the ask key: pure rules (bus.policy,
bus.rules), no Django, no database, no clock (each test passes its own `now`).

Every row of the table of verdicts has its test here; hypothesis throws hostile keys at
the key rule and at the evaluator.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bus import policy, rules
from bus.policy import DENY, GATE, SERVE, WAKE
from bus.rules import RuleError

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
LOCAL_B = "consumer-b#3f9c1a20"
REMOTE_B = "consumer-b@mac-mini#4289030d"
QA_MACMINI = "qa@macmini#7b02e5d1"

POLICY = """\
# what this project releases, decided in review
[[grant]]
ask = "status:*"
to = ["consumer-b", "qa@macmini"]
since = 2026-11-20
until = 2027-01-31
serve = ["scripts/status.sh", "--of={2}", "{1}"]

[[grant]]
ask = "deploy:*"
to = ["consumer-b"]
since = 2026-11-20
verdict = "gate"

[[grant]]
ask = "incident"
to = ["consumer-b"]
since = 2026-11-20
verdict = "wake"

[[grant]]
ask = "secrets:*"
to = ["consumer-b"]
since = 2026-11-20
verdict = "deny"

[[grant]]
ask = "capabilities"
to = ["consumer-b"]
since = 2026-04-01
until = 2026-07-01
serve = ["cat", "CAPABILITIES.md"]
"""

KEY_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}(:[a-z0-9][a-z0-9._-]{0,63}){0,3}")


def grant(**fields) -> str:
    """One [[grant]] table from TOML values written as text."""
    body = {"ask": '"status:*"', "to": '["consumer-b"]', "since": "2026-11-20"}
    body.update(fields)
    lines = [f"{key} = {value}" for key, value in body.items() if value is not None]
    return "[[grant]]\n" + "\n".join(lines) + "\n"


def evaluate(key, writer=LOCAL_B, text=POLICY, now=NOW):
    return policy.evaluate(key, writer, text, now)


def problems(text: str) -> list[str]:
    return [str(problem) for problem in policy.parse(text).problems]


# --- the ask key --------------------------------------------------------------------


@pytest.mark.parametrize(
    "key", ["status:db", "a", "port:staging", "a:b:c:d", "v1.2_x-y", "9", "x" * 64, "s:" + "y" * 64]
)
def test_a_well_formed_key_is_accepted_unchanged(key):
    assert rules.validate_ask(key) == key


@pytest.mark.parametrize(
    ("key", "what"),
    [
        ("status:../../etc/passwd", '".."'),
        ("status:a..b", '".."'),
        ("status/db", '"/", a path separator'),
        ("status:db rm", "a space or a control character"),
        ("status:db;rm", "shell metacharacter"),
        ("status:$(id)", "shell metacharacter"),
        ("status:`id`", "shell metacharacter"),
        ("status:db|sh", "shell metacharacter"),
        ("status:\x00db", "NUL"),
        ("Status:db", 'upper-case "S"'),
        ("status::db", "empty segment"),
        ("status:", "empty segment"),
        ("", "empty"),
        ("a:b:c:d:e", "5 segments"),
        ("status:" + "x" * 65, "65 characters"),
        ("status:.hidden", 'starts with "."'),
        ("status:-n", 'starts with "-"'),
        ("status:*", "shell metacharacter"),
        ("caf\u00e9", "may not hold"),
    ],
)
def test_a_key_that_is_not_well_formed_is_refused_naming_what_and_the_rule(key, what):
    with pytest.raises(RuleError) as refused:
        rules.validate_ask(key)
    message = str(refused.value)
    assert what in message
    assert "1 to 4 segments" in message and "e.g. status:db" in message
    assert "\n" not in message and "\x00" not in message


def test_a_key_that_is_not_text_is_refused():
    with pytest.raises(RuleError, match="not text"):
        rules.validate_ask(["status", "db"])


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=300))
def test_a_key_is_accepted_exactly_when_it_is_well_formed_and_never_holds_danger(key):
    """Whatever the text: accepted iff it is 1-4 segments of the pattern without "..";
    an accepted key holds no path separator, shell metacharacter, space, control
    character or upper case."""
    try:
        rules.validate_ask(key)
        accepted = True
    except RuleError as exc:
        accepted = False
        assert "\n" not in str(exc) and len(str(exc)) < 600
    assert accepted == bool(KEY_RE.fullmatch(key) and ".." not in key)
    if accepted:
        assert not set(key) & set("/\\;|&$`<>()*?[]{}'\" \t\n\x00") and key == key.lower()


# --- the table: every row -----------------------------------------------------------


def test_a_request_with_no_ask_is_free_text_for_a_person():
    assert evaluate(None) == (WAKE, "free text (no ask key) is for a person", None, None)
    assert evaluate("").verdict == WAKE


def test_with_no_policy_file_a_request_wakes_as_before():
    found = evaluate("status:db", text=None)
    assert found == (WAKE, "no policy: this project has not opted in", None, None)


def test_an_invalid_policy_serves_nothing_and_wakes_naming_the_line():
    broken = POLICY.replace('verdict = "gate"', 'verdict = "gate"\nserve = ["x"]')
    found = evaluate("status:db", text=broken)
    assert found.verdict == WAKE and found.argv is None
    assert found.reason.startswith("the policy cannot be read (line 13: ")
    assert "both serve and verdict" in found.reason


def test_a_policy_that_cannot_be_read_serves_nothing_and_wakes_saying_why():
    found = evaluate("status:db", text=policy.unreadable("Permission denied"))
    assert found.verdict == WAKE and found.argv is None
    assert found.reason == (
        "the policy cannot be read (Permission denied): nothing is served until it is fixed"
    )


def test_a_grant_for_the_writer_in_date_with_serve_serves_its_command_filled():
    found = evaluate("status:db")
    assert found == (
        SERVE,
        "granted to consumer-b until 2027-01-31",
        ("scripts/status.sh", "--of=db", "status"),
        2,
    )


@pytest.mark.parametrize(
    ("key", "verdict", "reason"),
    [
        (
            "deploy:prod",
            GATE,
            'the policy gates "deploy:prod" for consumer-b: a judge decides whether it '
            "wakes a person",
        ),
        ("incident", WAKE, 'the policy asks a person to answer "incident"'),
        ("secrets:db", DENY, 'the policy declines "secrets:db" for consumer-b'),
    ],
)
def test_a_grant_with_a_verdict_decides_as_written(key, verdict, reason):
    assert evaluate(key) == (
        verdict,
        reason,
        None,
        POLICY[: POLICY.index(key.split(":")[0])].count("\n"),
    )


def test_a_remote_device_on_a_bare_name_grant_is_denied_naming_key_and_writer():
    found = evaluate("status:db", writer=REMOTE_B)
    assert found.verdict == DENY and found.argv is None
    assert found.reason == 'no grant reaches "status:db" for consumer-b@mac-mini#4289030d'


def test_an_expired_grant_for_key_and_writer_is_denied_saying_when_it_expired():
    found = evaluate("capabilities")
    assert found.verdict == DENY and found.argv is None
    # until 2026-07-01, but since 2026-04-01 + 90 days comes first
    assert found.reason == 'your grant for "capabilities" expired on 2026-06-30'


def test_a_key_nothing_covers_wakes():
    assert evaluate("port:staging") == (
        WAKE,
        'nothing in the policy covers "port:staging"',
        None,
        None,
    )


@pytest.mark.parametrize("writer", [LOCAL_B, REMOTE_B, "stranger@far#1", "stranger"])
def test_a_traversal_like_key_landed_from_elsewhere_is_never_denied_it_wakes(writer):
    found = evaluate("status:../../etc/passwd", writer=writer)
    assert found == (WAKE, 'nothing in the policy covers "status:../../etc/passwd"', None, None)


# --- who a grant reaches ------------------------------------------------------------


def test_a_name_at_device_grant_reaches_that_devices_writers_only():
    assert (
        evaluate("status:db", writer=QA_MACMINI).reason == "granted to qa@macmini until 2027-01-31"
    )
    assert evaluate("status:db", writer="qa@other#7b02e5d1").verdict == DENY
    assert evaluate("status:db", writer="qa#7b02e5d1").verdict == DENY, (
        "a local qa is not qa@macmini"
    )
    assert evaluate("status:db", writer="qa").verdict == DENY


def test_a_bare_name_grant_reaches_the_agents_local_seats_and_its_bare_name():
    assert evaluate("status:db", writer="consumer-b").verdict == SERVE
    assert evaluate("status:db", writer="consumer-b#aa11bb22").verdict == SERVE
    assert evaluate("status:db", writer="consumer-bb#aa11bb22").verdict == DENY


def test_a_deny_grant_for_other_writers_still_lets_nothing_through_to_a_stranger():
    found = evaluate("secrets:db", writer="stranger#1")
    assert found.verdict == DENY
    assert found.reason == 'no grant reaches "secrets:db" for stranger#1'


# --- time ---------------------------------------------------------------------------


def test_a_grant_holds_through_its_last_day_in_utc_and_not_a_second_longer():
    last = datetime(2027, 1, 31, 23, 59, 59, tzinfo=UTC)
    assert evaluate("status:db", now=last).verdict == SERVE
    found = evaluate("status:db", now=last + timedelta(seconds=1))
    assert found == (DENY, 'your grant for "status:db" expired on 2027-01-31', None, 2)


def test_expiry_is_checked_in_utc_whatever_the_callers_zone():
    """01:00 on 1 February in Tokyo is still 31 January in UTC: the grant holds."""
    tokyo = timezone(timedelta(hours=9))
    assert evaluate("status:db", now=datetime(2027, 2, 1, 1, 0, tzinfo=tokyo)).verdict == SERVE
    new_york = timezone(timedelta(hours=-5))
    late = datetime(2027, 1, 31, 20, 0, tzinfo=new_york)  # 01:00 on 1 February in UTC
    assert evaluate("status:db", now=late).verdict == DENY


def test_a_grant_ends_90_days_after_since_whatever_its_until():
    text = grant(until="2027-12-31", serve='["true"]')
    assert (
        policy.evaluate("status:db", LOCAL_B, text, datetime(2027, 2, 18, 23, tzinfo=UTC)).verdict
        == SERVE
    )
    found = policy.evaluate("status:db", LOCAL_B, text, datetime(2027, 2, 19, tzinfo=UTC))
    assert found.reason == 'your grant for "status:db" expired on 2027-02-18'


def test_a_grant_not_yet_begun_is_denied_saying_when_it_begins():
    found = evaluate("status:db", now=datetime(2026, 11, 19, 23, 59, tzinfo=UTC))
    assert found == (DENY, 'your grant for "status:db" begins on 2026-11-20', None, 2)


def test_an_expired_grant_is_passed_over_for_a_renewed_one_below_it():
    text = grant(since="2026-01-01", verdict='"deny"') + grant(since="2026-11-01", serve='["true"]')
    found = policy.evaluate("status:db", LOCAL_B, text, NOW)
    assert found.verdict == SERVE and found.line == 6


def test_the_first_grant_in_file_order_decides():
    text = grant(verdict='"gate"') + grant(serve='["true"]')
    assert policy.evaluate("status:db", LOCAL_B, text, NOW).verdict == GATE


def test_a_naive_time_is_refused():
    with pytest.raises(ValueError):
        evaluate("status:db", now=datetime(2026, 12, 5, 12, 0))


# --- patterns and placeholders ------------------------------------------------------


def test_a_star_stands_for_exactly_one_segment():
    assert evaluate("status").verdict == WAKE
    assert evaluate("status:db:primary").verdict == WAKE
    assert evaluate("status:db").verdict == SERVE


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["status", "db", "..", "../etc", "/", "a/b", ";", "$(id)", "`id`", "\x00", "DB",
             "", "*", " ", "a b", "-n", ".git", "x" * 65, "\u202e", "\n", "{1}", "%s"]
        ),
        min_size=1,
        max_size=6,
    ).map(":".join)
    | st.text(max_size=80)
)  # fmt: skip
def test_a_hostile_key_is_never_denied_and_never_reaches_a_command(key):
    """A key that is not well-formed wakes (a probe is never denied); a served key fills
    the placeholders with its own well-formed segments only."""
    for writer in (LOCAL_B, REMOTE_B):
        found = evaluate(key, writer=writer)
        assert found.verdict in policy.VERDICTS and "\n" not in found.reason
        if rules.ask_key_problem(key) is not None:
            assert found.verdict == WAKE and found.argv is None, (key, found)
            assert found.reason.startswith(("nothing in the policy covers", "free text"))
        if found.verdict == SERVE:
            segments = key.split(":")
            assert found.argv == ("scripts/status.sh", f"--of={segments[1]}", segments[0])
            assert all(rules.ask_segment_problem(segment) is None for segment in segments)


def test_a_placeholder_in_an_argument_is_filled_and_other_braces_stay():
    text = grant(ask='"port:*:*"', serve='["bin/port", "{3}-{2}", "{x}", "{{2}}", "{}"]')
    found = policy.evaluate("port:staging:api", LOCAL_B, text, NOW)
    assert found.argv == ("bin/port", "api-staging", "{x}", "{staging}", "{}")


# --- the file: what makes a policy invalid, with its line ---------------------------


def test_a_valid_policy_has_its_grants_in_file_order_and_no_problems():
    parsed = policy.parse(POLICY)
    assert parsed.valid
    assert [g.ask for g in parsed.grants] == [
        "status:*", "deploy:*", "incident", "secrets:*", "capabilities",
    ]  # fmt: skip
    assert [g.line for g in parsed.grants] == [2, 9, 15, 21, 27]
    assert parsed.grants[0].lines == {"ask": 3, "to": 4, "since": 5, "until": 6, "serve": 7}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            grant(serve='["x"]', verdict='"deny"'),
            "line 6: the grant has both serve and verdict: keep one",
        ),
        (grant(), "line 1: the grant has neither serve nor verdict"),
        (grant(serve='["x"]', sevre='["y"]'), 'line 6: unknown key "sevre" in a grant'),
        (grant(ask=None, verdict='"wake"'), "line 1: the grant has no ask"),
        (grant(to=None, verdict='"wake"'), "line 1: the grant has no to"),
        (grant(since=None, verdict='"wake"'), "line 1: the grant has no since"),
        (grant(verdict='"serve"'), 'line 5: verdict "serve" is not one of gate, wake, deny'),
        (grant(verdict='"allow"'), 'line 5: verdict "allow" is not one of gate, wake, deny'),
        (grant(ask='"Status:*"', verdict='"wake"'), 'line 2: the pattern "Status:*" can never'),
        (grant(ask='"a:b:c:d:*"', verdict='"wake"'), "has 5 segments and a key has at most 4"),
        (grant(ask='"status::*"', verdict='"wake"'), "can never match a key (it has an empty"),
        (grant(ask='"status:**"', verdict='"wake"'), "can never match a key"),
        (grant(ask='"status:../x"', verdict='"wake"'), "can never match a key"),
        (grant(ask="7", verdict='"wake"'), 'line 2: ask must be text, such as ask = "status:*"'),
        (grant(to='"consumer-b"', verdict='"wake"'), "line 3: to must be a list of writers"),
        (grant(to="[]", verdict='"wake"'), "line 3: to must be a list of writers"),
        (grant(to='["Consumer B"]', verdict='"wake"'), 'line 3: the writer "Consumer B" can'),
        (grant(to='["b#1234"]', verdict='"wake"'), 'the writer "b#1234" can never match'),
        (grant(to='["b@mac@mini"]', verdict='"wake"'), 'the writer "b@mac@mini" can never'),
        (grant(to='["b@"]', verdict='"wake"'), 'the writer "b@" can never match'),
        (grant(since='"2026-11-20"', verdict='"wake"'), "line 4: since must be a date, such"),
        (grant(since="2026-11-20T10:00:00Z", verdict='"wake"'), "not a date and time"),
        (
            grant(until="2026-11-01", verdict='"wake"'),
            "line 5: the grant ends (2026-11-01) before it begins (2026-11-20)",
        ),
        (grant(serve="[]"), "line 5: serve must be a list of the command's arguments"),
        (grant(serve='"scripts/x.sh"'), "line 5: serve must be a list"),
        (grant(serve='["x", 3]'), "each argument of serve must be text, not a number"),
        (grant(serve='["", "a"]'), "the program of serve is empty"),
        (grant(serve='["/usr/bin/cat", "/etc/passwd"]'), 'line 5: the program of serve, "/usr'),
        (grant(serve='["../other/x.sh"]'), 'climbs out of the project with ".."'),
        (grant(serve='["scripts/../../x.sh"]'), 'climbs out of the project with ".."'),
        (grant(serve='["{2}"]'), "holds a placeholder: the asker would pick what runs"),
        (grant(serve='["bin/{1}.sh"]'), "holds a placeholder"),
        (grant(serve='["x", "{3}"]'), "the placeholder {3} names no segment of the pattern"),
        (grant(serve='["x", "{0}"]'), "the placeholder {0} names no segment"),
        (grant(serve='["x", "a\\u0000b"]'), "holds a NUL character"),
        ("version = 2\n" + grant(verdict='"wake"'), 'line 1: unknown key "version"'),
        ("[settings]\nx = 1\n", 'line 1: unknown key "settings"'),
        ('[grant]\nask = "a"\n', "line 1: write each grant as a [[grant]] table"),
        ('[[grant]]\nask = "a\n', "line 2: not valid TOML: "),
        ("[[grant]\n", "line 1: not valid TOML: "),
        ('[[grant]]\nask = "a"\nask = "b"\n', "line 3: not valid TOML: "),
    ],
)
def test_an_invalid_policy_names_the_problem_and_its_line(text, expected):
    found = problems(text)
    assert found, text
    assert any(problem.startswith(expected) or expected in problem for problem in found), found
    assert not policy.parse(text).valid


def test_every_problem_of_a_file_is_listed_each_with_its_own_line():
    text = (
        grant(serve='["x"]', verdict='"deny"')
        + "\n"
        + grant(ask='"Bad"', verdict='"wake"')
        + "\n"
        + grant(serve='["x"]', colour='"red"')
    )
    assert [p.line for p in policy.parse(text).problems] == [6, 9, 19]


def test_a_key_inside_a_multi_line_array_is_found_on_its_own_line():
    text = (
        '[[grant]]\nask = "status:*"\nto = [\n  "consumer-b",\n]\nsince = 2026-11-20\n'
        'serve = [\n  "x",\n  "{9}",\n]\n'
    )
    assert problems(text) == [
        'line 7: the placeholder {9} names no segment of the pattern "status:*" (it has 2: '
        "{1} to {2})"
    ]


def test_a_file_that_is_not_utf8_names_its_line():
    assert problems(b'[[grant]]\nask = "\xff"\n') == ["line 2: the file is not UTF-8 text"]


def test_a_file_over_the_limit_is_not_parsed():
    text = "# " + "x" * policy.MAX_POLICY_BYTES + "\n"
    assert problems(text) == [
        f"the file is over the limit of {policy.MAX_POLICY_BYTES} bytes: a policy is a page "
        "of grants"
    ]


def test_a_file_of_deeply_nested_arrays_is_a_problem_not_a_crash():
    text = "x = " + "[" * 50_000 + "]" * 50_000 + "\n"
    assert problems(text) == ["the file is nested too deeply to be a policy"]


def test_an_empty_policy_is_valid_and_covers_nothing():
    assert policy.parse("# nothing released yet\n").valid
    assert evaluate("status:db", text="").verdict == WAKE


# --- the lint beyond validity --------------------------------------------------------


def test_lint_names_a_grant_longer_than_90_days_at_its_until():
    parsed = policy.parse(grant(until="2027-06-30", serve='["true"]'))
    assert [str(p) for p in policy.lint(parsed, date(2026, 12, 5))] == [
        'line 5: the grant for "status:*" runs from 2026-11-20 until 2027-06-30, longer than '
        "90 days: it ends on 2027-02-18; set until to that date at the latest"
    ]


def test_lint_names_an_expired_grant_and_one_not_begun():
    parsed = policy.parse(POLICY)
    found = [str(p) for p in policy.lint(parsed, date(2026, 12, 5))]
    assert found == [
        'line 31: the grant for "capabilities" runs from 2026-04-01 until 2026-07-01, longer '
        "than 90 days: it ends on 2026-06-30; set until to that date at the latest",
        'line 27: the grant for "capabilities" expired on 2026-06-30: it can never match '
        "again; renew it with a new since, or remove it",
    ]
    early = [str(p) for p in policy.lint(policy.parse(grant(serve='["true"]')), date(2026, 11, 1))]
    assert early == [
        'line 4: the grant for "status:*" begins on 2026-11-20, after today (2026-11-01, '
        "UTC): until then it matches nothing"
    ]


def test_lint_finds_nothing_in_a_clean_policy():
    assert policy.lint(policy.parse(grant(serve='["true"]')), date(2026, 12, 5)) == []


# --- serving's environment -----------------------------------------------------------


def test_a_serve_command_gets_five_variables_and_nothing_else_of_the_server():
    server = {"PATH": "/bin", "HOME": "/home/u", "LANG": "en_GB.UTF-8", "AGENT_SALON_SECRET": "s",
              "DATABASE_URL": "postgres://x", "AWS_SECRET_ACCESS_KEY": "k"}  # fmt: skip
    assert policy.serve_environment(server, key="status:db", asker=LOCAL_B) == {
        "PATH": "/bin",
        "HOME": "/home/u",
        "LANG": "en_GB.UTF-8",
        "AGENT_SALON_ASK": "status:db",
        "AGENT_SALON_ASKER": LOCAL_B,
    }
    bare = policy.serve_environment({}, key="k", asker="a")
    assert (bare["PATH"], bare["HOME"], bare["LANG"]) == (policy.SERVE_DEFAULT_PATH, "/", "C.UTF-8")
