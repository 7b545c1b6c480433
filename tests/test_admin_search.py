"""The history browser's text box through Django's test client, on the store this run uses
(SQLite by default, PostgreSQL with DATABASE_URL): the list ranked as `salon search`
ranks, each row with its snippet, and an entry's hostile text shown, never obeyed."""

from __future__ import annotations

import re
from html import unescape

import pytest

from bus import services
from tests.factories import make_room, make_seat, send

pytestmark = pytest.mark.django_db

LIST = "/admin/bus/entry/"


@pytest.fixture
def staff_client(client, django_user_model, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    client.force_login(django_user_model.objects.create_superuser("staff", "s@x.org", "pw"))
    return client


@pytest.fixture
def team():
    return make_room("team")


def page(client, **params) -> str:
    response = client.get(LIST, params)
    assert response.status_code == 200, params
    return response.content.decode()


def listed(html: str) -> list[str]:
    """The ids of the entries listed, in the order of the list."""
    ids = re.findall(r"/admin/bus/entry/([0-9a-f-]{36})/change/", unescape(html))
    return list(dict.fromkeys(ids))


def snippets(html: str) -> list[str]:
    """The HTML of each row's snippet, in the order of the list."""
    return re.findall(r'<span class="salon-preview salon-snippet">(.*?)</span>', html)


def test_the_list_is_ranked_by_relevance_then_newest_first_as_salon_search_ranks(
    staff_client, team
):
    web = make_seat("web", team)
    older_weak = send(web, team, "cart " + "other words here " * 20)["id"]
    strong = send(web, team, "cart cart cart")["id"]
    newer_weak = send(web, team, "cart " + "other words here " * 20)["id"]
    send(web, team, "nothing to find here")

    html = page(staff_client, q="cart")

    assert listed(html) == [strong, newer_weak, older_weak]
    assert listed(html) == [r["id"] for r in services.search.search(None, "cart")["results"]]
    assert "Most relevant first, then newest first" in html


def test_each_row_shows_a_snippet_with_the_words_found_marked(staff_client, team):
    web = make_seat("web", team)
    send(web, team, "word " * 100 + "the cart total is wrong" + " tail" * 100)

    (snippet,) = snippets(page(staff_client, q='"cart total"'))

    assert "<mark>cart</mark> <mark>total</mark> is wrong" in snippet
    assert snippet.startswith("…") and snippet.endswith("…")


def test_an_entrys_markup_and_escape_codes_are_shown_as_text_in_the_snippet(staff_client, team):
    web = make_seat("web", team)
    hostile = (
        "<script>alert('cart')</script> cart \x1b[2J\x1b]0;owned\x07 "
        '<img src=x onerror="alert(1)"> &amp; </span></td><b>cart</b>'
    )
    send(web, team, hostile)

    html = page(staff_client, q="cart script")
    (snippet,) = snippets(html)

    assert "<script>alert" not in html and "<img src=x" not in html and "<b>cart" not in html
    assert "\x1b" not in html and "\x07" not in html
    assert snippet.startswith("&lt;<mark>script</mark>&gt;alert(&#x27;<mark>cart</mark>&#x27;)")
    assert "\\x1b[2J\\x1b]0;owned\\x07" in snippet
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt; &amp;amp; &lt;/span&gt;" in snippet
    assert re.sub(r"</?mark>", "", snippet).count("<") == 0


def test_the_other_filters_choose_what_is_ranked(staff_client, team):
    ops = make_room("ops")
    web, api = make_seat("web", team), make_seat("api", ops)
    weak = send(web, team, "deploy " + "filler words " * 20)["id"]
    strong = send(web, team, "deploy deploy now")["id"]
    send(api, ops, "deploy deploy deploy")
    send(web, team, "deploy", type="QUESTION")

    html = page(staff_client, q="deploy", room="team", type="FACT")

    assert listed(html) == [strong, weak]


def test_a_ranked_list_pages_through_in_its_order(staff_client, team):
    web = make_seat("web", team)
    for n in range(60):
        send(web, team, "cart " * (1 + n % 4) + f"entry {n} " + "filler " * (n % 7))
    ranked = [r["id"] for r in services.search.search(None, "cart", limit=200)["results"]]

    first, second = page(staff_client, q="cart"), page(staff_client, q="cart", p="2")

    assert len(ranked) == 60
    assert listed(first) + listed(second) == ranked
    assert len(snippets(first)) == 50 and len(snippets(second)) == 10


def test_without_words_the_list_stays_newest_first_without_snippets(staff_client, team):
    web = make_seat("web", team)
    old = send(web, team, "cart cart cart")["id"]
    new = send(web, team, "cart once")["id"]

    html = page(staff_client, room="team")

    assert listed(html) == [new, old]
    assert snippets(html) == [] and "<mark>" not in html
    assert "Newest first." in html


def test_a_query_with_nothing_to_look_for_lists_nothing_and_says_why(staff_client, team):
    send(make_seat("web", team), team, "cart")

    html = page(staff_client, q="-cart")

    assert listed(html) == []
    assert "Nothing to look for: give at least one word" in html
