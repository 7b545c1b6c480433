"""Search: the query language on the store this run uses (SQLite by default, PostgreSQL
with DATABASE_URL), who finds what, and what search never does. Each test is one claim,
judged on the entries found; the faces (CLI, MCP, admin) are tests/test_search_faces.py."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.utils import timezone

from bus import rules, services, signing
from bus.models import Entry, Membership, Room, Seat
from bus.rules import RuleError
from tests.factories import make_room, make_seat, send

pytestmark = pytest.mark.django_db

# Every string a person, an agent or an attacker may type; none of them may fail.
HOSTILE = [
    "",
    "   ",
    '"',
    '"unbalanced quote',
    'cart "total',
    "-",
    "--",
    "-only",
    "*",
    "**",
    "a*b*c*",
    "AND OR NOT",
    "NEAR(cart total, 3)",
    "content:cart",
    "^cart",
    "cart AND (total OR",
    "'; DROP TABLE bus_entry; --",
    "cart & !total | (x) <-> y:*",
    "\x00cart\x00",
    "\x1b[31mcart\x1b[0m",
    "cart\u202etotal",
    "\ud800lone",
    "😀 emoji",
    "{}[]()\\/",
    "x" * 10_000,
    "cart " * 2_000,
    '"' * 5_001,
    '"1e10abc def"',
    '"is for"*',
    '"~is~for"',
    "'~is~for':*",
    '"cart' + " is for" * 1_500 + '"',
    '-"is for"',
]


@pytest.fixture
def team() -> Room:
    return make_room("team")


def found(answer: dict) -> list[str]:
    return [r["id"] for r in answer["results"]]


def staff(query: str, **filters) -> dict:
    return services.search.search(None, query, **filters)


def cursor_of(seat: Seat, room: Room) -> int:
    return Membership.objects.get(seat=seat, room=room).cursor


# ---------------------------------------------------------------- the language


def test_every_word_must_be_in_the_entry(team):
    web = make_seat("web", team)
    both = send(web, team, "the cart total is wrong")["id"]
    send(web, team, "the cart is empty")
    send(web, team, "the total is right")

    assert found(staff("cart total")) == [both]


def test_words_are_found_in_any_case(team):
    web = make_seat("web", team)
    entry = send(web, team, "Deploy FAILED on Friday")["id"]

    assert found(staff("deploy failed")) == [entry]
    assert found(staff("FRIDAY")) == [entry]


def test_a_phrase_needs_its_words_in_order_and_together(team):
    web = make_seat("web", team)
    together = send(web, team, "please check the cart total before release")["id"]
    send(web, team, "the total of the cart")
    send(web, team, "cart and then a total")

    assert found(staff('"cart total"')) == [together]


def test_a_phrase_of_common_words_finds_exactly_the_entries_holding_it_in_order(team):
    web = make_seat("web", team)
    held = [
        send(web, team, "the fix is for the cart")["id"],
        send(web, team, "is for")["id"],
        send(web, team, "Is, for! (punctuation is no word)")["id"],
    ]
    for text in ("for is", "is not for", "is", "for", "island fortune", "this is; before"):
        send(web, team, text)

    assert sorted(found(staff('"is for"'))) == sorted(held)
    assert sorted(found(staff('"IS FOR" cart'))) == [held[0]]
    assert sorted(found(staff('"is for" -cart'))) == sorted(held[1:])
    assert sorted(found(staff('"for the cart"'))) == [held[0]]


def test_a_phrase_is_not_found_in_an_entry_holding_its_pairs_in_another_order(team):
    web = make_seat("web", team)
    held = send(web, team, "it is for the team")["id"]
    both_pairs = send(web, team, "it is for you and for the team")["id"]
    send(web, team, "the for is")

    assert found(staff('"is for the"')) == [held]
    assert found(staff('"for is"')) != [] and held not in found(staff('"for is"'))
    if connection.vendor == "postgresql":
        # Every pair of the phrase is in the entry: the order is checked, not only pairs.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT search_pairs @@ '~is~for & ~for~the'::tsquery FROM bus_entry WHERE id = %s",
                [uuid.UUID(both_pairs)],
            )
            assert cursor.fetchone()[0] is True


@pytest.mark.parametrize(
    ("query", "lookup"),
    [
        ('"is for"', ("'~is~for'", None, True)),
        ('"IS FOR" cart -draft', ("'~is~for'", "('cart') & !('draft')", True)),
        ('"is for the"', ("'~is~for' & '~for~the'", None, False)),
        ('"to x2 fo"*', ("'~to~x2'", None, False)),
        ('"1e10abc def"', None),  # the parser cuts 1e10abc: no pair to ask
        ("cart total", None),
        ("round*", None),
    ],
)
def test_a_phrase_is_asked_of_the_pairs_column_as_its_pairs(query, lookup):
    assert rules.tsquery_lookup(rules.parse_query(query)) == lookup


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the word pairs are PostgreSQL's")
def test_on_postgresql_a_phrase_search_reads_the_pairs_column_and_a_word_search_does_not(team):
    from django.test.utils import CaptureQueriesContext

    web = make_seat("web", team)
    held = send(web, team, "the fix is for the cart")["id"]
    for query, pairs_read in (('"is for"', True), ("cart", False), ('"fix is for"', True)):
        with CaptureQueriesContext(connection) as queries:
            assert found(services.search.search(web, query)) == [held]
        asked = " ".join(q["sql"] for q in queries.captured_queries)
        assert ("search_pairs @@" in asked) is pairs_read, query


def test_a_phrase_holding_a_word_the_parser_cuts_is_found_as_its_words_in_order(team):
    web = make_seat("web", team)
    held = send(web, team, "set 1e10abc to x2 for is")["id"]
    send(web, team, "to 1e10abc set")

    assert found(staff('"set 1e10abc to x2"')) == [held]
    assert found(staff('"x2 for is"')) == [held]
    assert found(staff('"to x2 fo"*')) == [held]


def test_a_prefix_finds_words_that_start_with_it(team):
    web = make_seat("web", team)
    one = send(web, team, "migrations are slow")["id"]
    two = send(web, team, "we migrated yesterday")["id"]
    send(web, team, "the mitigation plan")

    assert set(found(staff("migr*"))) == {one, two}


def test_a_prefix_after_a_phrase_applies_to_its_last_word(team):
    web = make_seat("web", team)
    entry = send(web, team, "the cart totals are in")["id"]
    send(web, team, "a total cart")

    assert found(staff('"cart tot"*')) == [entry]


def test_a_minus_word_leaves_out_the_entries_that_hold_it(team):
    web = make_seat("web", team)
    kept = send(web, team, "the build broke on linux")["id"]
    send(web, team, "the build broke on windows")

    assert found(staff("build -windows")) == [kept]


def test_a_minus_phrase_leaves_out_only_that_phrase(team):
    web = make_seat("web", team)
    kept = send(web, team, "the build is red, green later")["id"]
    send(web, team, "the build is green now")

    assert found(staff('build -"is green"')) == [kept]


def test_a_file_name_is_searched_as_its_words_in_order(team):
    web = make_seat("web", team)
    entry = send(web, team, "I am editing src/cart.py now")["id"]
    send(web, team, "python cart")

    assert found(staff("cart.py")) == [entry]


def test_words_of_other_scripts_and_accents_are_found(team):
    web = make_seat("web", team)
    entry = send(web, team, "Größe naïve 日本語 ok")["id"]

    assert found(staff("größe NAÏVE 日本語")) == [entry]


def test_an_unbalanced_quote_is_searched_as_words(team):
    web = make_seat("web", team)
    entry = send(web, team, "the cart has a bad total")["id"]

    answer = staff('"cart total')

    assert found(answer) == [entry]
    assert answer["query"] == "cart total"


def test_query_syntax_of_the_stores_is_only_words(team):
    web = make_seat("web", team)
    entry = send(web, team, "near the cart, and or not")["id"]
    send(web, team, "the cart")

    assert found(staff("NEAR( cart AND or NOT")) == [entry]
    assert found(staff("cart & !near")) == [entry]


def test_a_number_is_searched_in_the_text_never_as_a_room(team):
    web = make_seat("web", team)
    send(web, team, "no digits here")
    with_number = send(web, team, f"build {team.pk} passed")["id"]

    assert found(services.search.search(web, str(team.pk))) == [with_number]
    assert found(staff(str(team.pk))) == [with_number]


def test_a_query_with_only_minus_words_finds_nothing_and_says_why(team):
    web = make_seat("web", team)
    send(web, team, "anything")

    answer = staff("-windows")

    assert answer["results"] == []
    assert any("nothing to look for" in note for note in answer["notes"])


def test_a_query_longer_than_the_limit_is_searched_on_its_start_and_says_so(team):
    web = make_seat("web", team)
    entry = send(web, team, "cart")["id"]

    answer = staff("cart " + " ".join(f"word{i}" for i in range(2000)))

    assert found(answer) == []  # the first terms are words too: every word must match
    assert any(f"first {rules.MAX_QUERY_TERMS} terms" in n for n in answer["notes"])
    assert found(staff("cart" + " " * 20_000 + "ignored")) == [entry]


@pytest.mark.parametrize("query", HOSTILE, ids=range(len(HOSTILE)))
def test_no_query_string_fails(team, query):
    web = make_seat("web", team)
    send(web, team, "the cart total is 42; see cart.py")

    answer = services.search.search(web, query)

    assert isinstance(answer["results"], list)
    assert isinstance(answer["notes"], list)
    assert isinstance(staff(query)["results"], list)
    assert services.search.matching(Entry.objects.all(), query).count() >= 0


# ---------------------------------------------------------------- results


def test_results_are_ranked_by_relevance_then_newest_first(team):
    web = make_seat("web", team)
    older_weak = send(web, team, "cart " + "other words here " * 20)["id"]
    strong = send(web, team, "cart cart cart")["id"]
    newer_weak = send(web, team, "cart " + "other words here " * 20)["id"]

    assert found(staff("cart")) == [strong, newer_weak, older_weak]


def test_a_result_names_its_room_sender_time_and_id_with_a_highlighted_snippet(team):
    web = make_seat("web", team)
    sent = send(web, team, "the cart total is wrong", type="QUESTION")

    (result,) = staff("cart total")["results"]

    assert (result["id"], result["room"], result["from"], result["ts"], result["type"]) == (
        sent["id"],
        "team",
        web.name,
        sent["ts"],
        "QUESTION",
    )
    assert result["snippet"] == "the cart total is wrong"
    assert [result["snippet"][a:b] for a, b in result["highlights"]] == ["cart", "total"]


def test_the_snippet_is_one_line_around_the_first_hit(team):
    web = make_seat("web", team)
    send(web, team, "word " * 200 + "\n\nthe needle\nis here " + "tail " * 200)

    (result,) = staff("needle")["results"]

    assert "\n" not in result["snippet"]
    assert result["snippet"].startswith("…") and result["snippet"].endswith("…")
    assert "the needle is here" in result["snippet"]
    assert len(result["snippet"]) <= 200


def test_limit_caps_the_results(team):
    web = make_seat("web", team)
    for i in range(5):
        send(web, team, f"cart {i}")

    assert len(staff("cart", limit=2)["results"]) == 2


def test_a_limit_out_of_range_is_refused_naming_the_range(team):
    with pytest.raises(RuleError, match="from 1 to 200"):
        staff("cart", limit=0)


def test_filters_narrow_by_room_sender_type_and_time(team):
    other = make_room("other")
    web = make_seat("web", team, other)
    api = make_seat("api", team)
    in_team = send(web, team, "cart question", type="QUESTION")["id"]
    in_other = send(web, other, "cart fact")["id"]
    by_api = send(api, team, "cart from api")["id"]
    old = send(api, team, "cart long ago")["id"]
    Entry.objects.filter(id=old).update(ts=timezone.now() - timezone.timedelta(days=30))

    assert found(staff("cart", room="other")) == [in_other]
    assert set(found(staff("cart", sender="api"))) == {by_api, old}
    assert found(staff("cart", sender=web.name, type="question")) == [in_team]
    assert old not in found(staff("cart", since="7d"))


def test_a_tampered_entry_is_found_and_flagged(team):
    web = make_seat("web", team)
    entry = send(web, team, "the cart total")["id"]
    Entry.objects.filter(id=entry).update(content="the cart total, changed")

    answer = staff("changed")

    assert found(answer) == [entry]
    assert answer["results"][0]["tampered"] is True
    assert answer["tampered"] == 1


def test_the_admin_filter_finds_the_same_entries_whether_matches_are_few_or_many(team, monkeypatch):
    web = make_seat("web", team)
    carts = {send(web, team, f"cart {i}")["id"] for i in range(3)}
    send(web, team, "nothing here")

    def matched() -> set[str]:
        rows = services.search.matching(Entry.objects.order_by("-ts"), "cart -nothing")
        return {str(pk) for pk in rows.values_list("id", flat=True)}

    few = matched()
    monkeypatch.setattr(services.search, "DENSE_MATCHES", 2)  # 3 matches are "many"

    assert few == matched() == carts


# ---------------------------------------------------------------- who finds what


def test_a_seat_finds_only_entries_of_rooms_it_is_a_member_of(team):
    secret = make_room("secret")
    web = make_seat("web", team)
    spy = make_seat("spy", secret)
    mine = send(web, team, "the cart total")["id"]
    send(spy, secret, "the cart total in secret")

    assert found(services.search.search(web, "cart")) == [mine]
    assert found(services.search.search(spy, "cart")) != [mine]


def test_a_seat_finds_its_rooms_entries_whether_they_are_few_or_most_of_the_store(team):
    web = make_seat("web", team)
    mine = send(web, team, 'the "is for" cart')["id"]
    others = []
    for n in range(10):
        room = make_room(f"other{n}")
        other = make_seat(f"bot{n}", room)
        others += [send(other, room, f"is for the cart {k}")["id"] for k in range(2)]
    everywhere = make_seat("everywhere", team)
    for n in range(10):
        services.rooms.join_room(seat=everywhere, room=f"other{n}")

    # `team` holds 1 entry in 21, the rooms of `everywhere` all of them.
    for query in ("cart", '"is for"', "car*"):
        assert found(services.search.search(web, query)) == [mine], query
        answer = services.search.search(everywhere, query, limit=50)
        assert sorted(found(answer)) == sorted([mine, *others]), query


def test_a_seat_naming_a_room_it_is_not_in_is_refused_with_how_to_join(team):
    make_room("secret")
    web = make_seat("web", team)

    with pytest.raises(RuleError, match="join it first"):
        services.search.search(web, "cart", room="secret")


def test_a_seat_no_longer_in_a_room_no_longer_finds_its_entries(team):
    web = make_seat("web", team)
    other = make_seat("api", team, make_room("lobby"))
    send(web, team, "the cart total")
    services.rooms.part_room(seat=other, room="team")

    assert found(services.search.search(other, "cart")) == []


def test_staff_find_every_room(team):
    secret = make_room("secret")
    a = send(make_seat("web", team), team, "cart one")["id"]
    b = send(make_seat("spy", secret), secret, "cart two")["id"]

    assert set(found(staff("cart"))) == {a, b}


def test_search_never_moves_a_cursor(team):
    web = make_seat("web", team)
    reader = make_seat("api", team)
    send(web, team, "the cart total")
    before = cursor_of(reader, team)

    services.search.search(reader, "cart")

    assert cursor_of(reader, team) == before == 0
    assert services.reading.read_inbox(seat=reader, room="team", advance=False)["entries"]


def test_an_entry_landed_by_the_relay_is_found(team):
    """An entry written the way the relay lands one (via="relay", a remote sender)."""
    now = timezone.now()
    row = Entry(
        id=uuid.uuid4(),
        room=team,
        seq=Room.objects.get(pk=team.pk).last_seq + 1000,
        ts=now,
        sender="web@macmini#7b02e5d1",
        sender_agent="web",
        type="FACT",
        content="landed from the other machine: cart total",
        via="relay",
    )
    row.signature = signing.sign_entry(row)
    row.save(force_insert=True)

    assert found(staff("landed machine")) == [str(row.id)]


# ---------------------------------------------------------------- the index


def test_the_index_follows_an_entry_changed_outside_the_bus(team):
    web = make_seat("web", team)
    entry = send(web, team, "before")["id"]
    Entry.objects.filter(id=entry).update(content="after")

    assert found(staff("before")) == []
    assert found(staff("after")) == [entry]


@pytest.mark.skipif(connection.vendor != "sqlite", reason="the FTS5 triggers are SQLite's")
def test_the_search_triggers_are_in_place_after_every_migration():
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        triggers = {row[0] for row in cursor.fetchall()}
    assert {"entry_search_added", "entry_search_removed", "entry_search_changed"} <= triggers


@pytest.mark.skipif(connection.vendor != "sqlite", reason="FTS5's rebuild")
def test_a_rebuilt_index_finds_what_the_old_one_did(team):
    web = make_seat("web", team)
    entry = send(web, team, "the cart total")["id"]

    services.search.rebuild_index()

    assert found(staff("cart")) == [entry]


@pytest.mark.django_db(transaction=True)
def test_the_migration_indexes_the_entries_a_store_already_holds():
    from django.db.migrations.executor import MigrationExecutor

    # Written with today's models, then the store taken back to before the index: the
    # entry is one the index's migration finds already stored.
    room = make_room("team")
    old = send(make_seat("web", room), room, "written before the index existed")["id"]
    MigrationExecutor(connection).migrate([("bus", "0015_token_folded_label")])

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    assert found(staff("before index existed")) == [old]


# The column as migration 0017 wrote it: the words alone, no pairs.
WORDS_ALONE = "to_tsvector('simple', regexp_replace(content, '[^[:alnum:]]+', ' ', 'g'))"


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the word pairs are PostgreSQL's")
def test_a_phrase_asked_by_its_pairs_finds_and_ranks_what_the_words_alone_did(team):
    import random

    rng = random.Random(19)
    vocabulary = ["is", "for", "the", "a", "1e10abc", "x2", "école", "42", "fort"]
    web = make_seat("web", team)
    for _ in range(80):
        words = [rng.choice(vocabulary) for _ in range(rng.randint(1, 10))]
        send(web, team, " ".join(words) + rng.choice([".", ", is for", " (the) a", ""]))
    for _ in range(120):
        phrase = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(2, 4)))
        query = f'"{phrase}"' + rng.choice(["", "*", " -for", " the", ' -"for is"', " fo*"])
        tsquery = rules.tsquery_text(rules.parse_query(query))
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT id, ts_rank({WORDS_ALONE}, to_tsquery('simple', %s)) FROM bus_entry "
                f"WHERE {WORDS_ALONE} @@ to_tsquery('simple', %s)",
                [tsquery, tsquery],
            )
            before = {str(pk): float(f"{score:.4g}") for pk, score in cursor.fetchall()}

        answer = staff(query, limit=services.search.MAX_LIMIT)
        admin = services.search.matching(Entry.objects.all(), query)

        assert {r["id"]: r["score"] for r in answer["results"]} == before, query
        assert {str(pk) for pk in admin.values_list("id", flat=True)} == set(before), query


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the word pairs are PostgreSQL's")
def test_every_pair_a_phrase_is_asked_by_is_in_the_column_of_a_text_holding_it(team):
    import itertools
    import random

    # Words of letters and digits the parser may cut or read as numbers (1e5, 0e1x).
    rng = random.Random(2)
    words = ["".join(rng.choice("abex019") for _ in range(rng.randint(1, 6))) for _ in range(400)]
    asked = 0
    with connection.cursor() as cursor:
        for a, b in itertools.pairwise(words):
            lookup = rules.tsquery_lookup(rules.parse_query(f'"{a} {b}"'))
            if lookup is None:
                continue
            asked += 1
            cursor.execute(
                "SELECT entry_search_pairs(%s) @@ %s::tsquery",
                [f"then {a} {b} now", lookup[0]],
            )
            assert cursor.fetchone()[0] is True, (a, b, lookup)
    assert 100 < asked < 399  # most phrases are asked by their pair; some are not


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the tsvector's positions")
def test_a_phrase_at_the_last_position_a_tsvector_keeps_is_found_as_by_the_words_alone(team):
    web = make_seat("web", team)
    # A tsvector's positions stop at 16383: `y` and `z` both stand there, after `x`.
    held = send(web, team, "w " * 16_381 + "x y z")["id"]

    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {WORDS_ALONE} @@ to_tsquery('simple', 'x <-> z') FROM bus_entry WHERE id = %s",
            [uuid.UUID(held)],
        )
        assert cursor.fetchone()[0] is True
    assert found(staff('"x y"')) == [held]
    assert found(staff('"x z"')) == [held]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the word pairs are PostgreSQL's")
@pytest.mark.django_db(transaction=True)
def test_the_migration_fills_the_pairs_of_the_entries_a_store_already_holds():
    from django.db.migrations.executor import MigrationExecutor

    def pairs_of(entry: str) -> list[str] | None:
        """The entry's pair lexemes (None: the store has no pairs column)."""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT 1 FROM information_schema.columns "
                "WHERE table_name = 'bus_entry' AND column_name = 'search_pairs'"
            )
            if cursor.fetchone() is None:
                return None
            cursor.execute(
                "SELECT array(SELECT lexeme FROM unnest(search_pairs) ORDER BY lexeme) "
                "FROM bus_entry WHERE id = %s",
                [uuid.UUID(entry)],
            )
            return cursor.fetchone()[0]

    pairs = ["~before~it", "~for~the", "~is~for", "~it~is", "~the~pairs", "~written~before"]
    before = [("bus", "0018_file_claims")]
    # Written with today's models, then the store taken back to before the pairs.
    room = make_room("team")
    old = send(make_seat("web", room), room, "Written before: it is for the pairs.")["id"]
    MigrationExecutor(connection).migrate(before)
    try:
        assert pairs_of(old) is None

        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())

        assert pairs_of(old) == pairs
        assert found(staff('"is for the"')) == [old]

        MigrationExecutor(connection).migrate(before)  # and back: the words alone
        assert pairs_of(old) is None
        assert found(staff("written pairs")) == [old]
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    assert pairs_of(old) == pairs


# ---------------------------------------------------------------- the rule, on any text

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies


@pytest.mark.django_db(False)
@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(
    st.text(alphabet=st.characters(), max_size=300) | st.text('"-* ()aAb:^', max_size=40)
)
def test_any_text_parses_into_an_expression_fts5_accepts(text):
    import sqlite3

    parsed = rules.parse_query(text)
    match = rules.fts5_match(parsed, [1, 2])
    snippet, hits = rules.snippet("a b " + text, parsed)

    assert (match is None) == (not parsed.searchable)
    assert all(0 <= a < b <= len(snippet) for a, b in hits)
    if match is not None:
        db = sqlite3.connect(":memory:")
        db.execute("CREATE VIRTUAL TABLE f USING fts5(content, room_id)")
        db.execute("SELECT count(*) FROM f WHERE f MATCH ?", (match,)).fetchall()
