"""bus.ids: UUID v7 entry ids (RFC 9562), time-sortable and monotonic in one process."""

from __future__ import annotations

import itertools
import time
import uuid

import pytest

from bus import ids
from bus.ids import uuid7, uuid7_ms


@pytest.fixture(autouse=True)
def _own_clock_state(monkeypatch):
    """The generator's last-millisecond state is per process: tests that pass a future
    `now_ms` must not leave it ahead of the real clock for the ids of later tests."""
    monkeypatch.setattr(ids, "_last_ms", 0)
    monkeypatch.setattr(ids, "_counter", 0)


def test_an_id_is_a_version_7_rfc_9562_uuid():
    value = uuid7()

    assert (value.version, value.variant) == (7, uuid.RFC_4122)


def test_an_id_carries_its_millisecond_timestamp():
    before = time.time_ns() // 1_000_000
    value = uuid7()
    after = time.time_ns() // 1_000_000

    assert before <= uuid7_ms(value) <= after


def test_ids_made_in_the_same_millisecond_keep_their_order():
    fixed = time.time_ns() // 1_000_000

    made = [uuid7(fixed) for _ in range(1000)]

    assert made == sorted(made) and len(set(made)) == 1000


def test_ids_stay_increasing_when_the_clock_steps_back():
    later = time.time_ns() // 1_000_000
    first = uuid7(later)

    assert uuid7(later - 5_000) > first


def test_more_than_4096_ids_in_one_millisecond_carry_into_the_next_millisecond():
    fixed = time.time_ns() // 1_000_000

    made = [uuid7(fixed) for _ in range(5000)]

    assert made == sorted(made)
    assert uuid7_ms(made[-1]) == fixed + 1


def test_ids_made_in_a_tight_loop_are_strictly_increasing():
    made = [uuid7() for _ in range(10_000)]

    assert all(a < b for a, b in itertools.pairwise(made))
