"""bus.signing: the entry signature is a MAC over the canonical fields (SPEC §4)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from bus import signing

FIELDS = {
    "id": uuid.UUID("01900000-0000-7000-8000-000000000001"),
    "room": "team",
    "ts": datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC),
    "sender": "web#3f9c1a20",
    "type": "QUESTION",
    "to": ["api"],
    "re": uuid.UUID("01900000-0000-7000-8000-000000000000"),
    "content": "which port?",
    "meta": {"kind": "question", "n": 1},
}

CHANGED = {
    "id": uuid.UUID("01900000-0000-7000-8000-000000000002"),
    "room": "ops",
    "ts": FIELDS["ts"] + timedelta(milliseconds=1),
    "sender": "web#00000000",
    "type": "REQUEST",
    "to": ["api", "docs"],
    "re": None,
    "content": "which port? ",
    "meta": {"kind": "question", "n": 2},
}


def test_a_signature_verifies_over_the_same_fields():
    assert signing.verify(signing.sign(**FIELDS), **FIELDS)


@pytest.mark.parametrize("field", sorted(CHANGED))
def test_changing_any_signed_field_breaks_the_signature(field):
    signature = signing.sign(**FIELDS)

    assert not signing.verify(signature, **{**FIELDS, field: CHANGED[field]})


def test_a_signature_made_with_another_secret_does_not_verify(settings):
    signature = signing.sign(**FIELDS)
    settings.SALON_SECRET = "another secret"

    assert not signing.verify(signature, **FIELDS)


def test_an_empty_signature_does_not_verify():
    assert not signing.verify("", **FIELDS)


def test_the_order_of_meta_keys_does_not_matter():
    reordered = {**FIELDS, "meta": {"n": 1, "kind": "question"}}

    assert signing.sign(**reordered) == signing.sign(**FIELDS)


@pytest.mark.parametrize(
    ("written", "read_back"),
    [(1e20, 10**20), (1.5e300, int(json.loads("1" + "5" + "0" * 299))), (-0.0, 0), (100.0, 100)],
)
def test_a_number_read_back_in_another_spelling_keeps_the_signature(written, read_back):
    """PostgreSQL's jsonb returns 1e20 as 100000000000000000000 and -0.0 as 0."""
    signature = signing.sign(**{**FIELDS, "meta": {"n": [written]}})

    assert signing.verify(signature, **{**FIELDS, "meta": {"n": [read_back]}})


@pytest.mark.parametrize(("one", "other"), [(1, "1"), (1, True), (0, None), (2**70, 2**70 + 1)])
def test_values_that_differ_as_json_sign_differently(one, other):
    assert signing.sign(**{**FIELDS, "meta": {"v": one}}) != signing.sign(
        **{**FIELDS, "meta": {"v": other}}
    )


def test_a_lone_surrogate_in_an_altered_row_reads_as_a_mismatch_not_a_crash():
    signature = signing.sign(**FIELDS)

    assert not signing.verify(signature, **{**FIELDS, "content": "which port?\ud800"})


def test_canonical_form_is_compact_json_with_the_timestamp_in_milliseconds():
    text = signing.canonical(**{**FIELDS, "meta": {}}).decode()

    assert json.loads(text) == [
        str(FIELDS["id"]),
        "team",
        "2026-01-02T03:04:05.678Z",
        "web#3f9c1a20",
        "QUESTION",
        ["api"],
        str(FIELDS["re"]),
        "which port?",
        {},
    ]
    assert ", " not in text


def test_iso_ms_writes_utc_with_milliseconds_whatever_the_zone():
    paris = datetime(2026, 1, 2, 4, 4, 5, 678999, tzinfo=timezone(timedelta(hours=1)))

    assert signing.iso_ms(paris) == "2026-01-02T03:04:05.678Z"


def test_a_token_hash_is_sha256_hex_and_never_the_token():
    digest = signing.hash_token("salon_secret")

    assert len(digest) == 64 and "salon_secret" not in digest
    assert digest == signing.hash_token("salon_secret")
