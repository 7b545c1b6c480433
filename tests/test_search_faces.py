"""Search through every face: `salon search` as a real process (in-process and through a
running server), the MCP tool `search` through the `mcp` SDK's client against a real
daemon, and the admin's text box. Hostile query strings go through each of them; each
gets an answer, never a traceback or a 500."""

from __future__ import annotations

import json
import re
from html import unescape

import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from bus import services
from bus.models import Entry
from tests.claude_kit import API_SEAT, WEB_SEAT, api, salon, web
from tests.factories import make_room, make_seat, send
from tests.support import query_store

# What argv can carry (no NUL: the kernel refuses it in an argument).
HOSTILE_ARGV = [
    '"',
    '"unbalanced quote',
    "-",
    "-only",
    "*",
    "NEAR(cart total, 3)",
    "content:cart ^cart",
    "cart AND (total OR",
    "'; DROP TABLE bus_entry; --",
    "cart & !total | (x) <-> y:*",
    "\x1b[31mcart\x1b[0m",
    "😀",
    "x" * 10_000,
    "cart " * 2_000,
]
# Beside them, what JSON and a URL carry (a lone surrogate no client can encode: it is
# the service's test, tests/test_search.py, and the admin's as invalid UTF-8 below).
HOSTILE = [*HOSTILE_ARGV, "", "\x00cart\x00"]


def ok(done):
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr}"
    assert "Traceback" not in done.stderr
    return done


def meet(env):
    ok(salon(env, "rooms", "--create", "team"))
    ok(web(env, "join", "team"))
    ok(api(env, "join", "team"))


# ---------------------------------------------------------------- the command line


def test_salon_search_finds_ranks_and_shows_where_who_when_and_id(env):
    meet(env)
    ok(web(env, "send", "team", "QUESTION", "Who owns the cart total? src/cart.py is wrong."))
    ok(api(env, "send", "team", "FACT", "The cart badge is fine; the total is not."))
    ok(api(env, "send", "team", "FACT", "Unrelated: staging is down."))

    answer = json.loads(ok(api(env, "search", "cart", "total", "--json")).stdout)
    text = ok(api(env, "search", "cart total")).stdout

    assert [r["from"] for r in answer["results"]] == [WEB_SEAT, API_SEAT]
    assert text.startswith("2 entries for cart total in team, most relevant first:")
    assert f"— QUESTION  [{WEB_SEAT}]" in text
    assert "    Who owns the **cart** **total**? src/**cart**.py is wrong." in text
    assert f"(id {answer['results'][0]['id']})" in text


def test_salon_search_takes_minus_words_as_words_not_flags(env):
    meet(env)
    ok(web(env, "send", "team", "FACT", "the build broke on linux"))
    ok(web(env, "send", "team", "FACT", "the build broke on windows"))

    answer = json.loads(ok(web(env, "search", "build", "-windows", "--json")).stdout)
    alone = json.loads(ok(web(env, "search", "-windows build", "--json")).stdout)

    assert [r["snippet"] for r in answer["results"]] == ["the build broke on linux"]
    assert alone["results"] == answer["results"]


def test_salon_search_refuses_an_unknown_flag_in_one_line(env):
    meet(env)

    done = web(env, "search", "cart", "--lmit", "3")

    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "salon search: unrecognized arguments: --lmit 3 (see `salon search --help`)"
    ]


def test_salon_search_never_sends_entry_text_escape_codes_to_a_terminal(env):
    meet(env)
    ok(web(env, "send", "team", "FACT", "cart \x1b]0;owned\x07 title \x1b[2J cleared \x9b31m"))

    shown = ok(api(env, "search", "cart")).stdout

    assert "\x1b" not in shown and "\x07" not in shown and "\x9b" not in shown
    assert "\\x1b]0;owned\\x07" in shown


def test_salon_search_finds_only_rooms_of_the_seat(env):
    meet(env)
    ok(salon(env, "rooms", "--create", "secret"))
    ok(salon(env, "join", "secret", agent="spy", session="5b1e0000-0000-4000-8000-000000000001"))
    ok(
        salon(
            env,
            "send",
            "secret",
            "FACT",
            "the cart secret",
            agent="spy",
            session="5b1e0000-0000-4000-8000-000000000001",
        )
    )

    answer = json.loads(ok(web(env, "search", "cart", "--json")).stdout)
    named = web(env, "search", "cart", "--room", "secret")

    assert answer["results"] == [] and answer["rooms"] == ["team"]
    assert named.returncode == 1 and "join it first" in named.stderr


def test_salon_search_moves_no_cursor(env):
    meet(env)
    ok(web(env, "send", "team", "FACT", "the cart total"))
    cursors = query_store(env, "SELECT seat_id, room_id, cursor FROM bus_membership", ())

    ok(api(env, "search", "cart"))

    assert query_store(env, "SELECT seat_id, room_id, cursor FROM bus_membership", ()) == cursors


@pytest.mark.parametrize("query", HOSTILE_ARGV, ids=range(len(HOSTILE_ARGV)))
def test_every_hostile_query_gets_an_answer_from_salon_search(env, query):
    meet(env)
    ok(web(env, "send", "team", "FACT", "the cart total is 42"))

    done = ok(web(env, "search", "--", query))

    assert done.stdout.strip()


def test_hostile_queries_get_answers_from_a_running_server_too(env, daemon):
    meet(env)
    ok(web(env, "send", "team", "FACT", "the cart total is 42"))

    for query in HOSTILE_ARGV:
        answer = json.loads(ok(web(env, "search", "--json", "--", query)).stdout)
        assert isinstance(answer["results"], list), query[:40]
    assert "Traceback" not in daemon.log()


# ---------------------------------------------------------------- MCP


async def _session_search(url: str, calls: list[dict]) -> list:
    async with (
        streamable_http_client(url) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return [await session.call_tool(name, args) for name, args in calls]


@pytest.mark.slow
async def test_the_mcp_search_tool_answers_every_hostile_query(shared_daemon):
    url = f"{shared_daemon.url}/mcp?label=searcher"
    calls = [("send", {"text": "the cart total is 42, see src/cart.py"})]
    calls += [("search", {"query": q}) for q in HOSTILE]
    calls += [("search", {"query": "cart.py total"})]

    sent, *answers, found = await _session_search(url, calls)

    for query, answer in zip(HOSTILE, answers, strict=True):
        assert not answer.is_error, (query[:40], answer.content)
        assert isinstance(answer.structured_content["results"], list)
    (result,) = found.structured_content["results"]
    assert result["id"] == sent.structured_content["id"]
    assert result["room"] == "salon" and result["from"] == sent.structured_content["from"]
    hits = [result["snippet"][a:b] for a, b in result["highlights"]]
    assert hits == ["cart", "total", "cart", "py"]


@pytest.mark.slow
async def test_the_mcp_search_tool_needs_a_label_and_says_so(shared_daemon):
    (answer,) = await _session_search(f"{shared_daemon.url}/mcp", [("search", {"query": "x"})])

    assert answer.is_error
    assert "?label=" in answer.content[0].text


@pytest.mark.slow
async def test_the_mcp_search_tool_is_listed_with_its_language(shared_daemon):
    async with (
        streamable_http_client(f"{shared_daemon.url}/mcp?label=lister") as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}

    assert "prefix*" in tools["search"].description
    assert tools["search"].input_schema["required"] == ["query"]


# ---------------------------------------------------------------- the admin

LIST = "/admin/bus/entry/"


def listed_ids(html: str) -> set[str]:
    return set(re.findall(r"/admin/bus/entry/([0-9a-f-]{36})/change/", unescape(html)))


@pytest.fixture
def staff_client(client, django_user_model):
    user = django_user_model.objects.create_superuser("staff", "s@example.com", "pw")
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_the_admin_text_box_uses_the_search_language(staff_client, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    team = make_room("team")
    web_seat = make_seat("web", team)
    linux = send(web_seat, team, "the build broke on linux")["id"]
    windows = send(web_seat, team, "the build broke on windows")["id"]
    phrase = send(web_seat, team, "broke the build")["id"]

    def shown(q: str) -> set[str]:
        response = staff_client.get(LIST, {"q": q})
        assert response.status_code == 200, (q[:40], response.status_code)
        return listed_ids(response.content.decode())

    assert shown("build broke") == {linux, windows, phrase}
    assert shown('"build broke" -windows') == {linux}
    assert shown("win*") == {windows}
    assert shown("BUILD") == {linux, windows, phrase}


@pytest.mark.django_db
@pytest.mark.parametrize("query", HOSTILE, ids=range(len(HOSTILE)))
def test_the_admin_text_box_answers_every_hostile_query(staff_client, query):
    team = make_room("team")
    send(make_seat("web", team), team, "the cart total is 42")

    response = staff_client.get(LIST, {"q": query})

    assert response.status_code == 200


@pytest.mark.django_db
def test_the_admin_text_box_answers_invalid_utf8(staff_client):
    team = make_room("team")
    send(make_seat("web", team), team, "the cart total is 42")

    response = staff_client.get(LIST + "?q=%ED%A0%80cart%FF")

    assert response.status_code == 200


@pytest.mark.django_db
def test_the_admin_text_box_finds_every_room(staff_client):
    a, b = make_room("a"), make_room("b")
    one = send(make_seat("web", a), a, "cart one")["id"]
    two = send(make_seat("api", b), b, "cart two")["id"]

    html = staff_client.get(LIST, {"q": "cart"}).content.decode()

    assert listed_ids(html) == {one, two}
    assert Entry.objects.count() == 2
    assert services.search.search(None, "cart")["rooms"] is None
