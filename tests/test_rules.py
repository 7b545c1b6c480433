"""The rules of bus/rules/, one claim per test. Pure: no Django, no database."""

from datetime import UTC, datetime, timedelta

import pytest

from bus import rules
from bus.rules import (
    GONE,
    LIVE,
    UNKNOWN,
    AddresseeStatus,
    Decision,
    EntryFacts,
    RuleError,
    SeatFacts,
)

pytestmark = []

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
TAIL = "characters — history for the whole entry"

ALICE = SeatFacts(seat="web-app#3f9c1a20", agent="web-app")
BOB = SeatFacts(seat="api-service#c4e1aa00", agent="api-service")
REMOTE = SeatFacts(seat="web-app@macmini#7b02e5d1", agent="web-app@macmini")


def entry(type_: str = "FACT", to: tuple[str, ...] = (), re_author: str | None = None):
    return EntryFacts(sender_seat=BOB.seat, type=type_, to=to, re_author=re_author)


# --- constants --------------------------------------------------------------------


def test_the_four_types_and_five_phases_are_fixed():
    assert rules.TYPES == ("QUESTION", "ANSWER", "FACT", "REQUEST")
    assert rules.PHASES == ("explore", "plan", "apply", "verify", "blocked")


def test_the_windows_and_limits_are_the_specified_values():
    assert (LIVE, UNKNOWN, GONE) == ("live", "unknown", "gone")
    windows = (rules.LIVE_WINDOW, rules.UNKNOWN_WINDOW, rules.STALE_FOCUS, rules.SIBLING_WINDOW)
    assert windows == (
        timedelta(minutes=2),
        timedelta(minutes=30),
        timedelta(hours=4),
        timedelta(minutes=60),
    )
    assert rules.MAX_CONTENT_BYTES == 65536
    assert rules.MAX_META_KEYS == 32


def test_a_rule_error_is_a_value_error():
    assert issubclass(RuleError, ValueError)


# --- types ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "stored"),
    [("question", "QUESTION"), ("Answer", "ANSWER"), ("FACT", "FACT"), (" request ", "REQUEST")],
)
def test_a_type_is_case_insensitive_and_stored_upper_case(given, stored):
    assert rules.normalize_type(given) == stored


def test_an_unknown_type_is_refused_listing_the_four():
    with pytest.raises(RuleError) as err:
        rules.normalize_type("NOTE")
    assert str(err.value) == (
        'unknown entry type "NOTE": use one of QUESTION, ANSWER, FACT, REQUEST (any case), '
        "or leave it out to send a FACT"
    )


def test_a_type_that_is_not_text_is_refused():
    with pytest.raises(RuleError, match=r'^unknown entry type "3": use one of'):
        rules.normalize_type(3)


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        ({"kind": "question"}, "QUESTION"),
        ({"kind": "Request"}, "REQUEST"),
        ({"kind": "reply"}, "ANSWER"),
        ({"kind": "ACK"}, "ANSWER"),
        ({"kind": "status"}, "FACT"),
        ({"kind": 7}, "FACT"),
        ({"other": "question"}, "FACT"),
        ({}, "FACT"),
        (None, "FACT"),
    ],
)
def test_a_call_without_a_type_takes_it_from_meta_kind_else_fact(meta, expected):
    assert rules.type_from_meta(meta) == expected


# --- content and meta -------------------------------------------------------------


def test_content_is_returned_unchanged():
    assert rules.validate_content("  hello\n") == "  hello\n"


@pytest.mark.parametrize("blank", ["", "   ", "\n\t"])
def test_blank_content_is_refused(blank):
    with pytest.raises(RuleError) as err:
        rules.validate_content(blank)
    assert str(err.value) == "content is empty: write the message text (it cannot be blank)"


def test_content_that_is_not_text_is_refused():
    with pytest.raises(RuleError) as err:
        rules.validate_content(42)
    assert str(err.value) == "content must be text, not int: send the message as a string"


def test_content_of_exactly_64_kib_of_utf8_is_accepted():
    text = "é" * (32 * 1024)  # two bytes each
    assert rules.validate_content(text) == text


def test_content_over_64_kib_of_utf8_is_refused_counting_bytes_not_characters():
    with pytest.raises(RuleError) as err:
        rules.validate_content("é" * (32 * 1024) + "x")
    assert str(err.value) == (
        "content is 65537 bytes, over the limit of 65536 bytes (64 KiB): "
        "shorten it, or put the detail in a file and send its path"
    )


def test_content_with_a_lone_surrogate_is_refused():
    with pytest.raises(RuleError, match="not valid UTF-8"):
        rules.validate_content("ok \ud800")


def test_absent_meta_is_an_empty_object():
    assert rules.validate_meta(None) == {}


def test_meta_is_returned_as_a_copy():
    meta = {"kind": "question", "n": [1, 2.5, None, True]}
    result = rules.validate_meta(meta)
    assert result == meta
    assert result is not meta


def test_meta_with_exactly_32_keys_is_accepted():
    meta = {f"k{i}": i for i in range(32)}
    assert rules.validate_meta(meta) == meta


def test_meta_with_33_keys_is_refused():
    with pytest.raises(RuleError) as err:
        rules.validate_meta({f"k{i}": i for i in range(33)})
    assert str(err.value) == (
        "meta has 33 keys, over the limit of 32: keep fewer keys, or nest the detail under one key"
    )


@pytest.mark.parametrize("meta", [[1, 2], "kind=question", 5])
def test_meta_that_is_not_an_object_is_refused(meta):
    with pytest.raises(RuleError, match=r"^meta must be a JSON object, not \w+: send it as"):
        rules.validate_meta(meta)


def test_meta_with_a_non_string_key_is_refused():
    with pytest.raises(RuleError) as err:
        rules.validate_meta({1: "x"})
    assert str(err.value) == (
        'meta key "1" is not a string: use text keys only, e.g. {"kind": "question"}'
    )


@pytest.mark.parametrize("value", [object(), float("nan"), {1, 2}])
def test_meta_that_is_not_json_serializable_is_refused(value):
    with pytest.raises(RuleError, match=r"^meta is not JSON-serializable: use only strings"):
        rules.validate_meta({"x": value})


# --- phases -----------------------------------------------------------------------


@pytest.mark.parametrize(("given", "stored"), [("PLAN", "plan"), ("Verify", "verify")])
def test_a_phase_is_lower_cased(given, stored):
    assert rules.validate_phase(given) == stored


def test_an_unknown_phase_is_refused_listing_the_five():
    with pytest.raises(RuleError) as err:
        rules.validate_phase("debug")
    assert str(err.value) == (
        'unknown phase "debug": use one of explore, plan, apply, verify, blocked'
    )


# --- names ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["team", "a", "web-app#3f9c1a20", "web-app@macmini#7b02e5d1", "v1.2_x", "x" * 64]
)
def test_a_valid_name_is_returned_unchanged(name):
    assert rules.validate_name(name) == name


RULE = 'use 1 to 64 characters of letters, digits and . _ @ # - (no "..")'


def test_an_empty_name_is_refused_naming_what_it_is():
    with pytest.raises(RuleError) as err:
        rules.validate_name("", "room")
    assert str(err.value) == f"room name is empty: {RULE}"


def test_a_65_character_name_is_refused():
    with pytest.raises(RuleError) as err:
        rules.validate_name("x" * 65, "agent")
    assert str(err.value) == f'agent name "{"x" * 64}…" has 65 characters: {RULE}'


@pytest.mark.parametrize("name", ["my room", "team/x", "tëam", "a:b", "a\nb"])
def test_a_name_with_a_forbidden_character_is_refused(name):
    with pytest.raises(RuleError, match="holds a character that is not allowed"):
        rules.validate_name(name, "room")


def test_a_name_with_two_dots_is_refused():
    with pytest.raises(RuleError) as err:
        rules.validate_name("a..b", "seat")
    assert str(err.value) == f'seat name "a..b" contains "..": {RULE}'


def test_a_name_that_is_not_text_is_refused():
    with pytest.raises(RuleError) as err:
        rules.validate_name(None, "room")
    assert str(err.value) == f"room name must be text, not NoneType: {RULE}"


def test_a_hostile_name_is_echoed_clipped_to_64_characters_and_without_control_characters():
    with pytest.raises(RuleError) as err:
        rules.validate_name("\x1b[31m" + "A" * 10_000, "room")
    message = str(err.value)
    assert message.startswith('room name "?[31m' + "A" * 59 + '…" has 10005 characters')
    assert len(message) < 200


@pytest.mark.parametrize("what", ["agent", "label"])
def test_an_agent_name_may_not_contain_a_hash(what):
    with pytest.raises(RuleError) as err:
        rules.validate_name("web#app", what)
    assert str(err.value) == (
        f'{what} name "web#app" contains "#", which separates the agent from its session '
        'in a seat name: drop the "#" (e.g. "web-app")'
    )


# --- durations --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30s", timedelta(seconds=30)),
        ("90m", timedelta(minutes=90)),
        ("2h", timedelta(hours=2)),
        ("1d", timedelta(days=1)),
        ("1w", timedelta(weeks=1)),
        (" 2H ", timedelta(hours=2)),
    ],
)
def test_a_duration_is_a_whole_number_and_a_unit(text, expected):
    assert rules.parse_duration(text) == expected


@pytest.mark.parametrize("text", ["0m", "-5m", "1.5h", "90", "h", "2 h", "2hours", "", "1y"])
def test_a_malformed_duration_is_refused_with_examples(text):
    with pytest.raises(RuleError) as err:
        rules.parse_duration(text)
    assert str(err.value) == (
        f'duration "{text}" is not understood: use a positive whole number and a unit '
        "s, m, h, d or w, e.g. 90m, 2h, 1d"
    )


def test_an_overflowing_duration_is_refused():
    with pytest.raises(RuleError, match="is too long"):
        rules.parse_duration("99999999999w")


# --- aliases ----------------------------------------------------------------------


def test_aliases_are_parsed_from_pairs_ignoring_blanks():
    assert rules.parse_aliases(" api:api-service, ,web : web-app,") == {
        "api": "api-service",
        "web": "web-app",
    }


@pytest.mark.parametrize("text", ["", None, " , "])
def test_no_aliases_is_an_empty_mapping(text):
    assert rules.parse_aliases(text) == {}


@pytest.mark.parametrize("pair", ["api", "api:", ":api-service", "a:b:c"])
def test_a_malformed_alias_pair_is_refused_naming_the_pair(pair):
    with pytest.raises(RuleError) as err:
        rules.parse_aliases(f"web:web-app,{pair}")
    assert str(err.value) == (
        f'alias pair "{pair}" is malformed: write it as alias:real, pairs separated by commas '
        "(e.g. api:api-service,web:web-app)"
    )


def test_an_alias_with_a_bad_name_is_refused_naming_the_pair():
    with pytest.raises(RuleError) as err:
        rules.parse_aliases("my api:api")
    assert str(err.value) == (
        'alias pair "my api:api": alias name "my api" holds a character that is not allowed: '
        + RULE
    )


def test_an_alias_given_twice_with_different_targets_is_refused():
    with pytest.raises(RuleError, match='alias "api" is given twice'):
        rules.parse_aliases("api:api-service,api:apigw")


def test_resolving_aliases_keeps_order_and_drops_duplicates_after_resolution():
    aliases = {"api": "api-service", "web": "web-app"}
    assert rules.resolve_aliases(["web", "api", "api-service", "ops", "web"], aliases) == [
        "web-app",
        "api-service",
        "ops",
    ]


def test_aliases_resolve_one_step_only():
    assert rules.resolve_aliases(["a"], {"a": "b", "b": "c"}) == ["b"]


# --- seats and agents -------------------------------------------------------------


@pytest.mark.parametrize(
    ("seat", "agent"),
    [
        ("web-app#3f9c", "web-app"),
        ("web-app@macmini#7b02", "web-app@macmini"),
        ("web-app", "web-app"),
        ("web-app@macmini", "web-app@macmini"),
    ],
)
def test_the_agent_of_a_seat_is_everything_before_the_hash(seat, agent):
    assert rules.agent_of_seat(seat) == agent


@pytest.mark.parametrize(
    ("agent", "base"), [("web-app@macmini", "web-app"), ("web-app", "web-app")]
)
def test_the_base_agent_drops_the_device(agent, base):
    assert rules.base_agent(agent) == base


SID = "3f9c1a20-7b02-4e5d-9c4e-1aa00b2c3d4e"
OTHER = "3f9c1a20-7b02-4e5d-9c4e-ffffffffffff"


def test_a_seat_is_the_agent_and_the_first_eight_characters_of_the_session():
    assert rules.seat_name("web-app", SID, {}) == "web-app#3f9c1a20"


@pytest.mark.parametrize("session", [None, ""])
def test_a_caller_without_a_session_writes_as_the_bare_agent_name(session):
    assert rules.seat_name("web-app", session, {"web-app": "x"}) == "web-app"


def test_a_seat_name_held_by_the_same_session_is_kept():
    assert rules.seat_name("web-app", SID, {"web-app#3f9c1a20": SID}) == "web-app#3f9c1a20"


def test_a_colliding_seat_name_grows_to_twelve_then_sixteen_then_the_full_id():
    holders = {"web-app#3f9c1a20": OTHER}
    assert rules.seat_name("web-app", SID, holders) == "web-app#3f9c1a20-7b0"
    holders["web-app#3f9c1a20-7b0"] = OTHER
    assert rules.seat_name("web-app", SID, holders) == "web-app#3f9c1a20-7b02-4e"
    holders["web-app#3f9c1a20-7b02-4e"] = OTHER
    assert rules.seat_name("web-app", SID, holders) == f"web-app#{SID}"


def test_a_short_session_id_collision_goes_straight_to_the_full_id():
    assert rules.seat_name("cron", "abcdefgh12", {"cron#abcdefgh": "zzz"}) == "cron#abcdefgh12"


def test_a_session_id_of_eight_characters_or_less_is_used_whole():
    assert rules.seat_name("cron", "abc", {}) == "cron#abc"


@pytest.mark.parametrize("session", ["a#b", "x/../y", "has space", "a..b", "s" * 129])
def test_a_session_id_unfit_for_a_seat_name_is_refused(session):
    with pytest.raises(RuleError, match="is not usable in a seat name"):
        rules.seat_name("web-app", session, {})


# --- addressing -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("to", "seat", "expected"),
    [
        (("web-app#3f9c1a20",), ALICE, True),
        (("web-app",), ALICE, True),
        (("web-app#ffffffff",), ALICE, False),
        (("web-app@macmini",), ALICE, False),
        (("api-service",), ALICE, False),
        (("web-app@macmini#7b02e5d1",), REMOTE, True),
        (("web-app@macmini",), REMOTE, True),
        (("web-app",), REMOTE, True),
        (("web-app@laptop",), REMOTE, False),
        (("ops", "web-app"), ALICE, True),
        ((), ALICE, False),
    ],
)
def test_addressed_to_matches_the_seat_its_agent_or_a_remote_seats_base_agent(to, seat, expected):
    assert rules.addressed_to(to, seat) is expected


@pytest.mark.parametrize(
    ("to", "expected"), [((), True), (("web-app",), True), (("api-service",), False)]
)
def test_an_entry_is_for_me_when_broadcast_or_addressed_to_me(to, expected):
    assert rules.for_me(to, ALICE) is expected


# --- quiet ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("quiet", "until", "expected"),
    [
        (True, None, True),
        (True, NOW + timedelta(minutes=1), True),
        (True, NOW, False),
        (True, NOW - timedelta(minutes=1), False),
        (False, None, False),
        (False, NOW + timedelta(hours=1), False),
    ],
)
def test_quiet_is_active_without_expiry_or_until_the_expiry(quiet, until, expected):
    assert rules.quiet_active(quiet, until, NOW) is expected


# --- who is woken -----------------------------------------------------------------


def test_step_1_an_entry_addressed_to_someone_else_does_not_wake_the_seat():
    decision = rules.decide_wake(entry("QUESTION", to=("ops",)), ALICE, NOW)
    assert decision == Decision(False, "not_addressed")


def test_step_1_an_entry_addressed_elsewhere_does_not_wake_even_a_reply():
    got = rules.decide_wake(entry("ANSWER", to=("ops",), re_author=ALICE.seat), ALICE, NOW)
    assert got == Decision(False, "not_addressed")


def test_step_2_a_quiet_seat_is_not_woken():
    quiet = SeatFacts(seat=ALICE.seat, agent=ALICE.agent, quiet=True)
    assert rules.decide_wake(entry("REQUEST", to=(ALICE.seat,)), quiet, NOW) == Decision(
        False, "quiet"
    )


def test_step_2_a_quiet_seat_is_not_woken_by_a_reply_to_it():
    quiet = SeatFacts(seat=ALICE.seat, agent=ALICE.agent, quiet=True)
    got = rules.decide_wake(entry("ANSWER", re_author=ALICE.seat), quiet, NOW)
    assert got == Decision(False, "quiet")


def test_an_expired_quiet_is_absent():
    expired = SeatFacts(
        seat=ALICE.seat, agent=ALICE.agent, quiet=True, quiet_until=NOW - timedelta(seconds=1)
    )
    assert rules.decide_wake(entry("QUESTION"), expired, NOW) == Decision(True, "claim")


@pytest.mark.parametrize("type_", rules.TYPES)
def test_step_3_an_addressed_entry_wakes_whatever_its_type(type_):
    assert rules.decide_wake(entry(type_, to=("web-app",)), ALICE, NOW) == Decision(
        True, "addressed"
    )


def test_a_remote_seat_is_woken_by_its_agent_name_without_the_device():
    assert rules.decide_wake(entry("FACT", to=("web-app",)), REMOTE, NOW) == Decision(
        True, "addressed"
    )


@pytest.mark.parametrize("type_", rules.TYPES)
def test_step_4_an_entry_with_re_wakes_the_one_who_wrote_that_entry_whatever_its_type(type_):
    assert rules.decide_wake(entry(type_, re_author=ALICE.seat), ALICE, NOW) == Decision(
        True, "reply"
    )


def test_an_answer_with_re_wakes_the_one_who_asked():
    assert rules.wakes(entry("ANSWER", re_author=ALICE.seat), ALICE, NOW) is True


def test_an_answer_with_re_does_not_wake_a_sibling_seat_of_the_one_who_asked():
    sibling = SeatFacts(seat="web-app#99999999", agent="web-app")
    got = rules.decide_wake(entry("ANSWER", re_author=ALICE.seat), sibling, NOW)
    assert got == Decision(False, "not_a_claim")


@pytest.mark.parametrize("type_", ["QUESTION", "REQUEST", "question", "Request"])
def test_step_5_a_broadcast_question_or_request_wakes_every_seat(type_):
    assert rules.decide_wake(entry(type_), ALICE, NOW) == Decision(True, "claim")


@pytest.mark.parametrize("type_", ["FACT", "ANSWER"])
def test_step_6_a_broadcast_fact_or_answer_wakes_nobody(type_):
    assert rules.decide_wake(entry(type_), ALICE, NOW) == Decision(False, "not_a_claim")


def test_a_broadcast_fact_wakes_nobody():
    assert rules.wakes(entry("FACT"), ALICE, NOW) is False


def test_the_sender_is_never_woken_by_its_own_entry():
    own = EntryFacts(
        sender_seat=ALICE.seat, type="QUESTION", to=(ALICE.seat,), re_author=ALICE.seat
    )
    assert rules.decide_wake(own, ALICE, NOW) == Decision(False, "sender")


def test_a_sibling_seat_of_the_sender_is_woken_by_a_broadcast_question():
    own = EntryFacts(sender_seat="web-app#99999999", type="QUESTION")
    assert rules.decide_wake(own, ALICE, NOW) == Decision(True, "claim")


def test_every_reason_decide_wake_gives_is_listed():
    assert rules.REASONS == (
        "sender",
        "not_addressed",
        "quiet",
        "addressed",
        "reply",
        "claim",
        "not_a_claim",
    )


def test_wakes_is_the_decision_of_decide_wake():
    assert rules.wakes(entry("QUESTION"), ALICE, NOW) is True
    assert rules.wakes(entry("QUESTION", to=("ops",)), ALICE, NOW) is False


# --- liveness and focus -----------------------------------------------------------


@pytest.mark.parametrize(
    ("age", "expected"),
    [
        (timedelta(0), LIVE),
        (timedelta(minutes=2), LIVE),
        (timedelta(minutes=2, microseconds=1), UNKNOWN),
        (timedelta(minutes=29, seconds=59), UNKNOWN),
        (timedelta(minutes=30), GONE),
        (timedelta(days=3), GONE),
    ],
)
def test_liveness_is_live_within_two_minutes_unknown_under_thirty_else_gone(age, expected):
    assert rules.liveness(NOW - age, False, NOW) == expected


def test_an_open_stream_is_live_however_long_ago_the_seat_was_seen():
    assert rules.liveness(NOW - timedelta(days=9), True, NOW) == LIVE


def test_an_open_stream_is_live_even_never_seen():
    assert rules.liveness(None, True, NOW) == LIVE


def test_a_seat_never_seen_without_a_stream_is_gone():
    assert rules.liveness(None, False, NOW) == GONE


@pytest.mark.parametrize(
    ("age", "expected"),
    [
        (timedelta(hours=4), False),
        (timedelta(hours=4, seconds=1), True),
        (timedelta(minutes=5), False),
    ],
)
def test_a_focus_older_than_four_hours_is_stale(age, expected):
    assert rules.focus_is_stale(NOW - age, NOW) is expected


def test_no_focus_is_not_stale():
    assert rules.focus_is_stale(None, NOW) is False


# --- clipping ---------------------------------------------------------------------


def _clipped(text: str, limit: int) -> tuple[str, int | None]:
    """(what inbox hands out, the full length when cut), checking the held-back count."""
    clip = rules.clip(text, limit)
    if clip.full is None:
        assert clip.held_back == 0
    else:
        assert clip.text.endswith(f"+{clip.held_back} {TAIL}")
    return clip.text, clip.full


def test_clip_leaves_a_text_within_the_limit_alone():
    assert _clipped("x" * 20, 20) == ("x" * 20, None)


def test_clip_with_limit_zero_is_off():
    assert _clipped("x" * 5000, 0) == ("x" * 5000, None)


def test_clip_cuts_at_a_sentence_break_past_sixty_percent():
    text = "Alpha beta gamma. Delta epsilon zeta."  # 37 characters, ". " at 16
    assert _clipped(text, 20) == (f"Alpha beta gamma. … +20 {TAIL}", 37)


def test_clip_hard_cuts_when_the_only_break_is_early():
    text = "Hi. " + "x" * 30  # ". " at 2, well before 60 % of 20
    assert _clipped(text, 20) == ("Hi. " + "x" * 16 + f" … +14 {TAIL}", 34)


def test_clip_hard_cuts_when_the_break_is_exactly_at_sixty_percent():
    text = "abcdefghijk. " + "y" * 20  # the kept part would be 12 characters = 60 % of 20
    assert _clipped(text, 20) == (text[:20] + f" … +13 {TAIL}", 33)


def test_clip_hard_cuts_a_text_with_no_break():
    assert _clipped("z" * 50, 10) == ("z" * 10 + f" … +40 {TAIL}", 50)


def test_clip_cuts_at_a_paragraph_break_before_the_blank_line():
    text = "First paragraph here\n\nsecond paragraph"  # 38 characters, "\n\n" at 20
    assert _clipped(text, 24) == (f"First paragraph here … +18 {TAIL}", 38)


def test_clip_takes_the_latest_break_of_either_kind():
    text = "One two three\n\nFour five. Six seven eight nine"  # "\n\n" at 13, ". " at 24
    assert _clipped(text, 30) == (f"One two three\n\nFour five. … +21 {TAIL}", 46)


@pytest.mark.parametrize("mark", ["! ", "? ", ".\n"])
def test_clip_cuts_at_exclamation_question_and_line_end_breaks(mark):
    text = "abcdefghijklmnop" + mark + "rest of it"  # break after 17 characters
    assert _clipped(text, 20) == ("abcdefghijklmnop" + mark[0] + f" … +11 {TAIL}", 28)


def test_clip_keeps_a_sentence_ending_exactly_at_the_limit():
    text = "x" * 19 + ". tail"  # the full stop is the 20th character
    assert _clipped(text, 20) == ("x" * 19 + f". … +5 {TAIL}", 25)


# --- first cursor -----------------------------------------------------------------


def test_a_seat_with_no_earlier_sibling_starts_with_everything_unread():
    assert rules.first_cursor([], [3, 4]) == (0, None)


def test_a_new_seat_inherits_the_furthest_sibling_cursor():
    assert rules.first_cursor([12, 40, 7], []) == (40, None)


def test_recent_sibling_entries_already_read_stay_unread_and_nothing_else_read_does():
    assert rules.first_cursor([40, 12], [38, 35, 39]) == (40, 34)


def test_recent_sibling_entries_past_the_cursor_do_not_lower_it():
    assert rules.first_cursor([40], [41, 45]) == (40, None)


def test_only_recent_sibling_entries_within_the_cursor_lower_it():
    assert rules.first_cursor([40], [45, 39]) == (40, 38)


def test_a_recent_sibling_entry_at_seq_one_is_held_from_the_start():
    assert rules.first_cursor([10], [1]) == (10, 0)


# --- unknown addressees -----------------------------------------------------------


def test_closest_names_lists_every_name_closest_first():
    known = ["api-service", "web-app", "web-app#3f9c1a20", "ops"]
    assert rules.closest_names("wep-app", known) == [
        "web-app",
        "web-app#3f9c1a20",
        "api-service",
        "ops",
    ]


def test_closest_names_breaks_ties_alphabetically_and_drops_duplicates():
    assert rules.closest_names("zzz", ["bb", "aa", "bb"]) == ["aa", "bb"]


def test_closest_names_can_be_capped():
    assert rules.closest_names("web", ["web", "wab", "xyz"], n=2) == ["web", "wab"]


def test_closest_names_ignores_case_when_ranking():
    assert rules.closest_names("WEB-APP", ["ops", "web-app"]) == ["web-app", "ops"]


def test_an_unknown_addressee_error_names_the_room_lists_names_and_says_how_to_fix():
    message = rules.unknown_addressee_error("wep-app", ["ops", "web-app"], "team")
    assert message == (
        'nobody named "wep-app" has been in room "team" (names in this room, closest first: '
        "web-app, ops): check the spelling, or have that agent join the room first"
    )


def test_an_unknown_addressee_error_in_an_empty_room_says_so():
    message = rules.unknown_addressee_error("ops", [], "team")
    assert message == (
        'nobody named "ops" has been in room "team" (nobody has been in this room yet): '
        "check the spelling, or have that agent join the room first"
    )


def test_an_unknown_addressee_error_clips_a_hostile_name():
    message = rules.unknown_addressee_error("q" * 5000, ["ops"], "team")
    assert message.startswith('nobody named "' + "q" * 64 + '…" has been in room "team"')


# --- send notices -----------------------------------------------------------------


def notices(**changes):
    args = {
        "to_status": (),
        "woken": ["api-service#c4e1aa00"],
        "other_live_seats": 1,
        "type": "FACT",
        "to": (),
        "content_length": 10,
        "long_chars": 1500,
    }
    args.update(changes)
    return rules.send_notices(**args)


def test_a_waking_short_entry_has_no_notice():
    assert notices() == []


def test_an_addressee_with_no_live_seat_is_told_the_entry_waits():
    got = notices(to=("ops",), to_status=[AddresseeStatus("ops", live_seats=0)], woken=[])
    assert got[0] == (
        '"ops" has no live session: the entry waits in the room and will be read when a '
        "session of it comes back."
    )


def test_a_quiet_addressee_is_reported_with_its_expiry_to_the_minute():
    until = datetime(2025, 6, 1, 13, 30, 45, tzinfo=UTC)
    got = notices(to=("ops",), to_status=[AddresseeStatus("ops", live_seats=1, quiet_until=until)])
    assert got == [
        '"ops" is quiet until 2025-06-01T13:30+00:00: the entry is delivered but does not wake it.'
    ]


def test_a_quiet_addressee_without_expiry_is_quiet_until_it_turns_quiet_off():
    got = notices(to=("ops",), to_status=[AddresseeStatus("ops", live_seats=1, quiet_forever=True)])
    assert got == [
        '"ops" is quiet until it turns quiet off: the entry is delivered but does not wake it.'
    ]


def test_a_gone_and_quiet_addressee_gets_both_notices():
    got = notices(to=("ops",), to_status=[AddresseeStatus("ops", live_seats=0, quiet_forever=True)])
    assert [n.split(":")[0] for n in got] == [
        '"ops" has no live session',
        '"ops" is quiet until it turns quiet off',
    ]


def test_a_broadcast_fact_that_wakes_nobody_says_an_errand_needs_to_or_a_claim_type():
    assert notices(woken=[], other_live_seats=3) == [
        "This entry wakes nobody, though 3 other live seats are in the room: it will be read "
        "at their next inbox; an errand needs `to` (who should act) or the type QUESTION or "
        "REQUEST."
    ]


def test_an_addressed_entry_that_wakes_nobody_blames_the_addressees():
    assert notices(woken=[], other_live_seats=1, to=("ops",)) == [
        "This entry wakes nobody, though 1 other live seat is in the room: "
        "its addressees are quiet or have no live session."
    ]


def test_a_broadcast_question_that_wakes_nobody_says_everyone_is_quiet():
    assert notices(woken=[], other_live_seats=2, type="question") == [
        "This entry wakes nobody, though 2 other live seats are in the room: "
        "every other live seat is quiet."
    ]


def test_an_entry_in_an_otherwise_empty_room_has_no_wakes_nobody_notice():
    assert notices(woken=[], other_live_seats=0) == []


def test_a_long_entry_is_told_every_seat_reads_all_of_it():
    assert notices(content_length=1501) == [
        "This entry is 1501 characters long (over 1500): every seat in the room reads all "
        "of it; consider shortening it, or putting the detail in a file and sending its path."
    ]


def test_a_long_entry_the_inbox_clips_says_who_reads_all_of_it_and_who_the_first_part():
    assert notices(content_length=2000, inbox_chars=1200) == [
        "This entry is 2000 characters long (over 1500): the seats it wakes read all of it, "
        "every other seat's inbox only about its first 1200 characters (history shows it "
        "whole); consider shortening it, or putting the detail in a file and sending its path."
    ]
    [nobody] = notices(content_length=2000, inbox_chars=1200, woken=[], other_live_seats=0)
    assert "it wakes nobody, so every inbox shows only about its first 1200" in nobody


def test_an_addressee_seen_lately_but_not_live_is_not_told_it_has_no_live_session():
    got = notices(to=("ops",), to_status=[AddresseeStatus("ops", live_seats=0, unknown_seats=1)])
    assert got == [
        '"ops" has a session seen in the last 30 minutes but not known to be live: it is '
        "woken if it is still there; otherwise the entry waits in the room and will be read "
        "when a session of it comes back."
    ]


def test_an_entry_exactly_at_the_long_limit_has_no_long_notice():
    assert notices(content_length=1500) == []


def test_a_long_chars_of_zero_turns_the_long_notice_off():
    assert notices(content_length=99_999, long_chars=0) == []


def test_notices_come_in_order_addressees_then_wakes_nobody_then_length():
    got = notices(
        to=("ops",),
        to_status=[AddresseeStatus("ops", live_seats=0)],
        woken=[],
        other_live_seats=1,
        content_length=2000,
    )
    assert [n[:20] for n in got] == [
        '"ops" has no live se',
        "This entry wakes nob",
        "This entry is 2000 c",
    ]


def test_a_signed_off_seat_is_gone_until_it_shows_life_again():
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    seen = now - timedelta(seconds=10)
    assert rules.liveness(seen, False, now, signed_off=seen) == rules.GONE
    assert rules.liveness(now, False, now, signed_off=seen) == rules.LIVE


def test_a_new_seat_is_owed_the_wake_rule_for_what_it_inherits():
    seat = rules.SeatFacts("api#2", "api")
    asked = rules.EntryFacts("web#1", "REQUEST", ("api",))
    kw = {"by_own_agent": False, "sibling_told": False}
    assert rules.owed_on_arrival(asked, seat, NOW, **kw) == rules.Decision(True, "addressed")
    assert rules.owed_on_arrival(rules.EntryFacts("web#1", "FACT"), seat, NOW, **kw) is None
    assert rules.owed_on_arrival(asked, seat, NOW, by_own_agent=False, sibling_told=True) is None
    assert rules.owed_on_arrival(asked, seat, NOW, by_own_agent=True, sibling_told=False) is None
