"""bus.strict: the input rules every door shares, and the safe output helpers."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bus import strict


def refused(body: bytes) -> str:
    with pytest.raises(strict.NotJson) as caught:
        strict.decode_json(body)
    return str(caught.value)


# ---------------------------------------------------------------- JSON


def test_a_plain_document_decodes_and_a_byte_order_mark_is_tolerated():
    assert strict.decode_json(b'\xef\xbb\xbf{"a": [1, 2.5, "x", null, true]}') == {
        "a": [1, 2.5, "x", None, True]
    }


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"", "it is empty"),
        (b"\xff{}", "not UTF-8, a bad byte at offset 0"),
        (b'{"a": NaN}', "NaN is not JSON"),
        (b"[-Infinity]", "-Infinity is not JSON"),
        (b'{"a": 1e400}', "the number 1e400 is beyond the range of a 64-bit float"),
        (b"9" * 65, "a number is longer than 64 characters"),
        (b'{"env": 1, "env": 2}', "the key 'env' appears twice in one object"),
        (b"[" * 513 + b"]" * 513, "nested more than 512 levels deep"),
        (b"[" * 100_000 + b"]" * 100_000, "nested more than 512 levels deep"),
        (b'["\\udfff"]', "a lone UTF-16 surrogate escape (\\ud800-\\udfff without its pair)"),
    ],
)
def test_what_is_not_strict_json_is_refused_with_its_reason(body, reason):
    assert refused(body) == reason


def test_a_surrogate_pair_escape_is_one_character():
    assert strict.decode_json(b'"\\ud83d\\ude00"') == "\U0001f600"


def test_a_document_512_levels_deep_is_accepted():
    assert strict.depth(strict.decode_json(b"[" * 512 + b"]" * 512)) == 512


def test_a_body_over_its_limit_is_too_large_before_it_is_read():
    with pytest.raises(strict.TooLarge) as caught:
        strict.decode_json(b"[" + b" " * 100 + b"]", max_bytes=10)
    assert (caught.value.size, caught.value.limit) == (102, 10)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_decode_or_are_refused_as_not_json(body):
    with contextlib.suppress(strict.NotJson):
        strict.decode_json(body)


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=["Cs"]), max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(JSON_VALUES)
def test_what_a_json_encoder_writes_reads_back_the_same(value):
    assert strict.decode_json(json.dumps(value).encode()) == value


def test_depth_counts_levels_without_recursing():
    deep: list = []
    for _ in range(50_000):
        deep = [deep]
    assert strict.depth(deep) == 50_001
    assert (strict.depth("x"), strict.depth({}), strict.depth({"a": [1]})) == (0, 1, 2)


# ---------------------------------------------------------------- headers


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer salon_abc", "salon_abc"),
        ("bearer   salon_abc  ", "salon_abc"),
        ("Basic salon_abc", None),
        ("Bearer", None),
        ("Bearer a b", None),
        ("Bearer caf\xe9", None),
        ("Bearer " + "x" * 513, None),
        (None, None),
    ],
)
def test_a_bearer_token_is_printable_ascii_after_the_scheme(header, token):
    assert strict.bearer_token(header) == token


@pytest.mark.parametrize(
    ("content_type", "parsed"),
    [
        ("application/json", ("application/json", None)),
        (' Application/JSON ; charset="UTF-8"', ("application/json", "utf-8")),
        (None, ("", None)),
    ],
)
def test_a_content_type_is_its_media_type_and_charset(content_type, parsed):
    assert strict.media_type(content_type) == parsed


ALLOWED = ["localhost", "127.0.0.1", "::1", "salon.internal:9315"]


@pytest.mark.parametrize(
    ("host", "origin"),
    [
        ("127.0.0.1:9315", None),
        ("localhost", "http://localhost:9315"),
        ("[::1]:9315", "http://[::1]:9315"),
        ("salon.internal:9315", "https://salon.internal:9315"),
        (None, None),
        ("127.0.0.1", ""),
    ],
)
def test_an_allowed_host_and_origin_pass(host, origin):
    assert strict.host_origin_problem(host, origin, ALLOWED) is None


@pytest.mark.parametrize(
    ("host", "origin", "named"),
    [
        ("evil.example:9315", None, "Host 'evil.example:9315'"),
        ("bad_host!", None, "Host 'bad_host!'"),
        ("127.0.0.1", "http://evil.example", "Origin 'http://evil.example'"),
        ("127.0.0.1", "null", "Origin 'null'"),
        ("127.0.0.1", "http://[::1", "Origin 'http://[::1'"),
        ("salon.internal:80", None, "Host 'salon.internal:80'"),
        ("a\nb", None, "Host 'a\\nb'"),
    ],
)
def test_a_foreign_host_or_origin_is_refused_naming_it(host, origin, named):
    problem = strict.host_origin_problem(host, origin, ALLOWED)
    assert problem is not None and named in problem


@pytest.mark.parametrize(
    ("value", "number"),
    [("5", 5), (" 12 ", 12), ("\xb2", None), ("9" * 4301, None), ("-1", None), ("", None)],
)
def test_a_last_event_id_is_a_short_run_of_ascii_digits(value, number):
    assert strict.event_id(value) == number


# ---------------------------------------------------------------- output


def test_safe_text_escapes_lone_surrogates_so_json_reads_them_back():
    text = strict.safe_text(json.dumps({"a": "x\ud800y"}, ensure_ascii=False))
    text.encode("utf-8")
    assert json.loads(text) == {"a": "x\ud800y"}


def test_loggable_escapes_line_breaks_and_control_characters():
    assert strict.loggable("a\nb\r\x7f\x1b\u2028c") == "a\\nb\\r\\x7f\\x1b\\u2028c"


def test_loggable_clips_long_values_saying_how_much_is_left_out():
    assert strict.loggable("c" * 1000, 10) == "cccccccccc…(+990 characters)"
