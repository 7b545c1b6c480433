"""In process: the limits every writer meets, and rows no reader can be broken by.

The same claims are made from the outside, against a real daemon, in test_security*.py;
these are the fast ones, on bus.rules and bus.services directly.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from django.apps import apps
from django.db import connection

from bus import rules, services, signing
from bus.models import Entry
from bus.rules import RuleError
from tests.factories import entry_of, make_room, make_seat, send


def nested(levels: int) -> dict:
    """A meta object `levels` deep (the object itself is one level)."""
    value: object = "x"
    for _ in range(levels - 1):
        value = [value]
    return {"a": value}


# ---------------------------------------------------------------- the limits


def test_a_meta_eight_levels_deep_is_accepted():
    assert rules.validate_meta(nested(8)) == nested(8)


@pytest.mark.parametrize("levels", [9, 326, 5000])
def test_a_meta_nested_deeper_than_eight_levels_is_refused_naming_the_limit(levels):
    with pytest.raises(RuleError, match=r"meta is nested \d+ levels deep, over the limit of 8"):
        rules.validate_meta(nested(levels))


def test_a_meta_over_16_kib_is_refused_naming_the_limit():
    rules.validate_meta({"blob": "m" * (16 * 1024 - 20)})
    with pytest.raises(RuleError, match=r"meta is \d+ bytes as JSON, over the limit of 16384"):
        rules.validate_meta({"blob": "m" * (16 * 1024)})


def test_thirty_two_addressees_are_accepted_and_duplicates_count_once():
    names = [f"agent{i}" for i in range(32)]
    assert rules.validate_addressees(names + names) == names


def test_a_thirty_third_addressee_is_refused_naming_the_limit():
    with pytest.raises(RuleError, match="33 addressees, over the limit of 32"):
        rules.validate_addressees([f"agent{i}" for i in range(33)])


def test_a_focus_names_at_most_fifty_files_of_at_most_256_characters():
    assert len(rules.split_files([f"f{i}" for i in range(50)])) == 50
    with pytest.raises(RuleError, match="51 files, over the limit of 50"):
        rules.split_files(",".join(f"f{i}" for i in range(51)))
    with pytest.raises(RuleError, match="257 characters, over the limit of 256"):
        rules.split_files(["p" * 257])


def test_a_label_with_an_at_sign_is_refused_but_a_remote_agent_name_is_not():
    with pytest.raises(RuleError, match="only the relay"):
        rules.validate_name("acme@laptop", "label")
    assert rules.validate_name("acme@laptop", "agent") == "acme@laptop"


@pytest.mark.parametrize("session_id", ["", "8714f782", "0123456789abcde"])
def test_a_claimed_session_id_under_16_characters_is_refused(session_id):
    with pytest.raises(RuleError, match="16 characters"):
        rules.validate_claimed_session(session_id)


@pytest.mark.django_db
def test_send_refuses_thirty_three_known_addressees_and_stores_nothing():
    team = make_room("team")
    writer = make_seat("web", team)
    names = [make_seat(f"agent{i}", team).agent.name for i in range(33)]

    with pytest.raises(RuleError, match="over the limit of 32"):
        send(writer, team, "all of you", to=names)
    assert not Entry.objects.exists()


# ---------------------------------------------------------------- rows written outside the bus


def store_raw(entry: Entry, **columns: str) -> None:
    """Overwrite columns of a stored entry with raw SQL, as anyone with the file can."""
    sets = ", ".join(f'"{name}" = %s' for name in columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE bus_entry SET {sets} WHERE id = %s",
            [*columns.values(), entry.id.hex if connection.vendor == "sqlite" else entry.id],
        )


ODD_ROWS = {
    "meta nested 900 deep": {"meta": '{"a": ' + "[" * 900 + "]" * 900 + "}"},
    "an integer of 5000 digits": {"meta": '{"n": ' + "9" * 5000 + "}"},
    "a number beyond a float": {"meta": '{"n": 1e400}'},
    "a lone surrogate": {"meta": '{"a": "\\ud800"}', "to": '["\\udfff"]'},
    "meta that is a list": {"meta": "[1, 2]"},
    "to that is a number": {"to": "5", "delivered_to": '{"a": 1}'},
    "to of nested lists": {"to": "[[1], {}]"},
}


@pytest.mark.django_db
@pytest.mark.parametrize("columns", ODD_ROWS.values(), ids=ODD_ROWS.keys())
def test_a_row_changed_outside_the_bus_reads_as_tampered_on_every_service(columns):
    if connection.vendor != "sqlite" and "\\ud800" in json.dumps(columns):
        pytest.skip("PostgreSQL cannot store a lone surrogate")
    team = make_room("team")
    writer, reader = make_seat("web", team), make_seat("api", team)
    entry = entry_of(send(writer, team, "a note.", type="QUESTION"))
    store_raw(entry, **columns)

    told = services.telling.claim_nudges(seat=reader)  # before inbox reads it
    history = services.reading.read_history(seat=reader, room="team")
    inbox = services.reading.read_inbox(seat=reader, room="team")

    assert [e["tampered"] for e in history["entries"]] == [True]
    assert [e["tampered"] for e in inbox["entries"]] == [True]
    assert [e["tampered"] for e in told] == [True]
    services.telling.record_deliveries(delivered={str(entry.id): [reader.name]}, failed={})


# ---------------------------------------------------------------- signature versions


def resign_migration():
    import importlib

    return importlib.import_module("bus.migrations.0007_entry_signature_v2")


# What the migration uses of its schema editor: the connection.
EDITOR = SimpleNamespace(connection=connection)


@pytest.mark.django_db
def test_the_migration_re_signs_old_signatures_and_leaves_tampered_rows_tampered():
    team = make_room("team")
    writer = make_seat("web", team)
    old, tampered = (entry_of(send(writer, team, f"note {n}.")) for n in (1, 2))
    Entry.objects.filter(pk=old.pk).update(
        signature=signing.signature_v1(signing.entry_fields(old))
    )
    Entry.objects.filter(pk=tampered.pk).update(signature="0" * 64)
    store_raw(tampered, meta='{"a": ' + "[" * 900 + "]" * 900 + "}")

    resign_migration().forward(apps, EDITOR)

    verdicts = {e.pk: signing.verdict(e) for e in Entry.objects.select_related("room")}
    assert verdicts == {old.pk: signing.VALID, tampered.pk: signing.TAMPERED}


@pytest.mark.django_db
def test_the_migration_backwards_gives_valid_rows_their_old_signature():
    team = make_room("team")
    entry = entry_of(send(make_seat("web", team), team, "a note."))

    resign_migration().backward(apps, EDITOR)

    assert signing.verdict(Entry.objects.select_related("room").get(pk=entry.pk)) == signing.OLD


@pytest.mark.django_db
def test_an_entry_is_stored_with_a_version_2_signature_over_its_seq_and_via():
    team = make_room("team")
    entry = entry_of(send(make_seat("web", team), team, "a note."))
    assert entry.signature.startswith("v2:") and signing.verdict(entry) == signing.VALID

    Entry.objects.filter(pk=entry.pk).update(seq=entry.seq + 1000)

    assert signing.verdict(Entry.objects.select_related("room").get(pk=entry.pk)) == "tampered"
