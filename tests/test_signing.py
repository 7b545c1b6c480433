"""bus.signing: the entry signature is a MAC over every stored field a reader sees or
filters on; version-1 signatures of older rows still verify, as OLD."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from bus import signing

FIELDS = {
    "id": uuid.UUID("01900000-0000-7000-8000-000000000001"),
    "room": "team",
    "seq": 7,
    "ts": datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC),
    "sender": "web#3f9c1a20",
    "sender_agent": "web",
    "type": "QUESTION",
    "to": ["api"],
    "re": uuid.UUID("01900000-0000-7000-8000-000000000000"),
    "content": "which port?",
    "meta": {"kind": "question", "n": 1},
    "via": "tool",
    "sender_addr": "127.0.0.1",
    "sender_session": "5f0c",
}

CHANGED = {
    "id": uuid.UUID("01900000-0000-7000-8000-000000000002"),
    "room": "ops",
    "seq": 8,
    "ts": FIELDS["ts"] + timedelta(milliseconds=1),
    "sender": "web#00000000",
    "sender_agent": "api",
    "type": "REQUEST",
    "to": ["api", "docs"],
    "re": None,
    "content": "which port? ",
    "meta": {"kind": "question", "n": 2},
    "via": "relay",
    "sender_addr": "10.9.9.9",
    "sender_session": "forged",
}
V1_FIELDS = ("id", "room", "ts", "sender", "type", "to", "re", "content", "meta")


def sign(fields: dict) -> str:
    return signing.sign_fields(fields)


def valid(signature: str, fields: dict) -> bool:
    return signing.verdict_of(signature, fields) == signing.VALID


def test_a_signature_verifies_over_the_same_fields():
    assert valid(sign(FIELDS), FIELDS)


def test_a_new_signature_is_version_2_and_fits_the_column():
    signature = sign(FIELDS)

    assert signature.startswith("v2:") and len(signature) <= 64


@pytest.mark.parametrize("field", sorted(CHANGED))
def test_changing_any_stored_field_a_reader_sees_breaks_the_signature(field):
    signature = sign(FIELDS)

    assert signing.verdict_of(signature, {**FIELDS, field: CHANGED[field]}) == signing.TAMPERED


def test_a_signature_made_with_another_secret_does_not_verify(settings):
    signature = sign(FIELDS)
    settings.SALON_SECRET = "another secret"

    assert signing.verdict_of(signature, FIELDS) == signing.TAMPERED


@pytest.mark.parametrize("signature", ["", "v2:", "v2:x", "0" * 64, None])
def test_an_empty_or_foreign_signature_does_not_verify(signature):
    assert signing.verdict_of(signature, FIELDS) == signing.TAMPERED


def test_a_version_1_signature_still_verifies_and_says_it_is_old():
    assert signing.verdict_of(signing.signature_v1(FIELDS), FIELDS) == signing.OLD


@pytest.mark.parametrize("field", V1_FIELDS)
def test_a_version_1_signature_covers_its_nine_fields(field):
    signature = signing.signature_v1(FIELDS)

    assert signing.verdict_of(signature, {**FIELDS, field: CHANGED[field]}) == signing.TAMPERED


def test_a_version_1_signature_written_by_an_older_version_still_verifies(settings):
    """The value below was computed by the version-1 code of 2026-11 (its `sign`), so a
    change to the canonical form that would turn every old row tampered fails here."""
    settings.SALON_SECRET = "pinned secret"
    written = "41ba9b27a85de5c88d24d026eaf5aa91ed45962dfa99b509305bf52fc75aac55"

    assert signing.verdict_of(written, FIELDS) == signing.OLD


def test_a_version_1_signature_cannot_pass_as_version_2():
    forged = "v2:" + signing.signature_v1(FIELDS)

    assert signing.verdict_of(forged, FIELDS) == signing.TAMPERED


def test_the_order_of_meta_keys_does_not_matter():
    reordered = {**FIELDS, "meta": {"n": 1, "kind": "question"}}

    assert sign(reordered) == sign(FIELDS)


@pytest.mark.parametrize(
    ("written", "read_back"),
    [(1e20, 10**20), (1.5e300, int(json.loads("1" + "5" + "0" * 299))), (-0.0, 0), (100.0, 100)],
)
def test_a_number_read_back_in_another_spelling_keeps_the_signature(written, read_back):
    """PostgreSQL's jsonb returns 1e20 as 100000000000000000000 and -0.0 as 0."""
    signature = sign({**FIELDS, "meta": {"n": [written]}})

    assert valid(signature, {**FIELDS, "meta": {"n": [read_back]}})


@pytest.mark.parametrize(("one", "other"), [(1, "1"), (1, True), (0, None), (2**70, 2**70 + 1)])
def test_values_that_differ_as_json_sign_differently(one, other):
    assert sign({**FIELDS, "meta": {"v": one}}) != sign({**FIELDS, "meta": {"v": other}})


@pytest.mark.parametrize(
    "altered",
    [
        {"content": "which port?\ud800"},
        {"meta": "{not json"},
        {"to": 5},
        {"meta": {"x": object()}},
        {"meta": {"x": float("inf")}},
        {"seq": None},
    ],
)
def test_an_altered_row_that_cannot_be_signed_reads_as_tampered_not_a_crash(altered):
    assert signing.verdict_of(sign(FIELDS), {**FIELDS, **altered}) == signing.TAMPERED


def test_canonical_form_is_compact_json_with_the_timestamp_in_milliseconds():
    text = signing.canonical_v2({**FIELDS, "meta": {}}).decode()

    assert json.loads(text) == {
        "v": 2,
        "id": str(FIELDS["id"]),
        "room": "team",
        "seq": 7,
        "ts": "2026-01-02T03:04:05.678Z",
        "sender": "web#3f9c1a20",
        "senderAgent": "web",
        "type": "QUESTION",
        "to": ["api"],
        "re": str(FIELDS["re"]),
        "content": "which port?",
        "meta": {},
        "via": "tool",
        "senderAddr": "127.0.0.1",
        "senderSession": "5f0c",
    }
    assert ", " not in text


def test_iso_ms_writes_utc_with_milliseconds_whatever_the_zone():
    paris = datetime(2026, 1, 2, 4, 4, 5, 678999, tzinfo=timezone(timedelta(hours=1)))

    assert signing.iso_ms(paris) == "2026-01-02T03:04:05.678Z"


def test_a_token_hash_is_sha256_hex_and_never_the_token():
    digest = signing.hash_token("salon_secret")

    assert len(digest) == 64 and "salon_secret" not in digest
    assert digest == signing.hash_token("salon_secret")
