"""The staff views through Django's test client: who may see them, that nothing
can be written through them, and what the history browser and an entry's page show."""

from __future__ import annotations

import re
import time
from contextlib import contextmanager
from datetime import UTC, timedelta
from html import unescape

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from bus import services, signing
from bus.admin import base as bus_admin
from bus.models import Entry, Room, Seat
from tests.factories import RoomFactory

pytestmark = pytest.mark.django_db

LIST = "/admin/bus/entry/"


def detail(entry_id) -> str:
    return f"/admin/bus/entry/{entry_id}/change/"


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def team():
    RoomFactory(name="team")
    seat = services.seats.check_in(agent="web-app", session_id="aaaa1111")
    services.rooms.join_room(seat=seat, room="team")
    return seat


@pytest.fixture
def entry(team):
    report = services.entries.send_entry(
        seat=team,
        text="First line of the report.\n\nSecond paragraph <b>not bold</b>.",
        room="team",
        type="FACT",
        meta={"build": 812, "kind": "note"},
        sender_addr="10.0.0.7",
        sender_session="mcp-session-1",
    )
    Entry.objects.filter(id=report["id"]).update(
        delivered_to=["api#bbbb2222"], delivery_errors=["web-app#dead0000"]
    )
    return Entry.objects.get(id=report["id"])


def send_many(seat, n, *, text="entry {i}"):
    for i in range(n):
        services.entries.send_entry(seat=seat, text=text.format(i=i), room="team")


def page(response) -> str:
    assert response.status_code == 200, response.status_code
    return response.content.decode()


# ---------------------------------------------------------------- who may look


@pytest.mark.parametrize("url", [LIST, "/admin/bus/room/", "/admin/bus/seat/", "/admin/"])
def test_anonymous_visitors_are_sent_to_the_login_page(client, url):
    response = client.get(url)

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_a_logged_in_user_who_is_not_staff_is_sent_to_the_login_page(client):
    user = User.objects.create_user("visitor", password="pw-1234-long")
    client.force_login(user)

    response = client.get(LIST)

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_staff_without_the_view_permission_is_refused(client):
    user = User.objects.create_user("staff", password="pw-1234-long", is_staff=True)
    client.force_login(user)

    assert client.get(LIST).status_code == 403


def test_staff_with_the_view_permission_can_browse(client, entry):
    user = User.objects.create_user("staff", password="pw-1234-long", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_entry"))
    client.force_login(user)

    assert "First line of the report." in page(client.get(LIST))
    assert client.get(detail(entry.id)).status_code == 200


def test_staff_without_the_view_permission_cannot_open_the_stats_page(client):
    user = User.objects.create_user("staff", password="pw-1234-long", is_staff=True)
    client.force_login(user)

    assert client.get("/admin/stats/").status_code == 403
    assert "salon-stats-module" not in client.get("/admin/").content.decode()


def test_the_mcp_session_pages_never_show_a_whole_session_id(admin_client):
    from mcpgate import sessions

    session = sessions.create_session(label="web", rooms=[], version="2025-11-25", client_info={})
    session.claude_session_id = "3f9c1a20-0000-4000-8000-00000000cafe"
    session.save()
    sessions.bind_seat(session)

    listing = page(admin_client.get("/admin/mcpgate/mcpsession/"))
    found = page(admin_client.get("/admin/mcpgate/mcpsession/", {"q": "web"}))
    seat = page(admin_client.get(f"/admin/bus/seat/{session.seat.pk}/change/"))

    for html in (listing, found, seat):
        assert session.id not in html and session.claude_session_id not in html
    assert session.id[:8] + "…" in listing and session.id[:8] + "…" in found
    assert admin_client.get(f"/admin/mcpgate/mcpsession/{session.id}/change/").status_code == 404


def test_a_seat_of_a_session_that_has_not_checked_in_is_not_keyed_by_its_credential(db):
    from mcpgate import sessions

    session = sessions.create_session(label="web", rooms=[], version="2025-11-25", client_info={})
    seat = sessions.bind_seat(session).seat

    assert seat.name == f"web#{session.id[:8]}"
    assert session.id not in seat.session_id


# ---------------------------------------------------------------- read-only


def test_there_is_no_add_page_for_entries(admin_client):
    assert admin_client.get(LIST + "add/").status_code == 403
    assert admin_client.post(LIST + "add/", {"content": "x"}).status_code == 403
    assert not Entry.objects.exists()


def test_a_post_to_an_entry_page_is_refused_and_changes_nothing(admin_client, entry):
    response = admin_client.post(detail(entry.id), {"content": "rewritten", "type": "QUESTION"})

    assert response.status_code == 403
    entry.refresh_from_db()
    assert entry.content.startswith("First line")
    assert signing.verify_entry(entry)


def test_an_entry_cannot_be_deleted(admin_client, entry):
    url = f"/admin/bus/entry/{entry.id}/delete/"

    assert admin_client.get(url).status_code == 403
    assert admin_client.post(url, {"post": "yes"}).status_code == 403
    assert Entry.objects.filter(id=entry.id).exists()


def test_the_list_has_no_add_button_and_no_bulk_actions(admin_client, entry):
    html = page(admin_client.get(LIST))

    assert LIST + "add/" not in html
    assert 'name="action"' not in html
    assert "action-checkbox" not in html


def test_the_entry_page_is_a_view_with_no_save_button(admin_client, entry):
    html = page(admin_client.get(detail(entry.id)))

    assert 'name="_save"' not in html
    assert "View entry" in html


@pytest.mark.parametrize("model", ["room", "seat"])
def test_rooms_and_seats_are_read_only(admin_client, team, model):
    obj = Room.objects.get(name="team") if model == "room" else team
    base = f"/admin/bus/{model}/"

    assert admin_client.get(base + "add/").status_code == 403
    assert admin_client.post(f"{base}{obj.pk}/change/", {"name": "renamed"}).status_code == 403
    assert admin_client.post(f"{base}{obj.pk}/delete/", {"post": "yes"}).status_code == 403
    obj.refresh_from_db()
    assert obj.name != "renamed"


# ---------------------------------------------------------------- the entry page


def test_the_entry_page_shows_the_whole_entry(admin_client, entry):
    html = page(admin_client.get(detail(entry.id)))

    # the whole content, escaped (the markup in it is text, not HTML)
    assert "Second paragraph &lt;b&gt;not bold&lt;/b&gt;." in html
    assert "&quot;build&quot;: 812" in html  # meta as pretty JSON
    assert "api#bbbb2222" in html  # delivered_to
    assert "web-app#dead0000" in html  # delivery_errors
    assert "10.0.0.7" in html
    assert "mcp-sess…" in html and "mcp-session-1" not in html  # masked: a credential
    assert "✓ valid" in html
    assert "TAMPERED" not in html


def test_a_tampered_entry_is_marked_as_tampered_on_its_page(admin_client, entry):
    Entry.objects.filter(id=entry.id).update(content="I never said that")

    html = page(admin_client.get(detail(entry.id)))

    assert 'id="salon-tampered"' in html
    assert "TAMPERED" in html
    assert 'class="salon-tampered"' in html
    assert "I never said that" in html


def test_a_tampered_entry_is_flagged_in_the_list(admin_client, entry):
    Entry.objects.filter(id=entry.id).update(meta={"build": 813, "kind": "note"})

    html = page(admin_client.get(LIST))

    assert "salon-tampered-badge" in html


def test_times_are_machine_readable_utc_for_the_local_time_script(admin_client, entry):
    html = page(admin_client.get(detail(entry.id)))

    stamp = entry.ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    assert re.search(rf'<time datetime="{stamp}\.\d{{3}}Z" title="[^"]+ UTC">', html)


def test_an_unknown_entry_id_redirects_with_a_message(admin_client):
    response = admin_client.get(detail("0190f0f0-0000-7000-8000-000000000000"), follow=True)

    assert response.status_code == 200
    assert "exist" in response.content.decode()


# ---------------------------------------------------------------- the list


def test_the_list_is_newest_first(admin_client, team):
    send_many(team, 3, text="number {i}")

    html = page(admin_client.get(LIST))

    assert html.index("number 2") < html.index("number 1") < html.index("number 0")


def test_the_list_applies_the_filters_from_the_query_string(admin_client, team):
    ci = services.seats.check_in(agent="ci")
    services.entries.send_entry(seat=ci, text="from ci", room="team")
    services.entries.send_entry(seat=team, text="from web-app", room="team")

    html = page(admin_client.get(LIST + "?source=ci"))

    assert "from ci" in html
    assert "from web-app" not in html
    assert "source=ci" in html  # the summary of the active filters


def test_an_invalid_filter_lists_nothing_and_says_why(admin_client, entry):
    html = page(admin_client.get(LIST + "?since=last+tuesday"))

    assert "ISO 8601" in html
    assert "First line of the report." not in html


def test_an_unknown_filter_parameter_is_named_with_the_known_ones_and_lists_nothing(
    admin_client, entry
):
    """REGRESSION: `?ts_from=` silently redirected to `?e=1`, which lists every entry: a
    filter the person meant looked applied. The page now names the parameter, lists the
    ones there are, and lists nothing until the URL is fixed."""
    response = admin_client.get(LIST + "?ts_from=2025-06-01&room=team")

    html = unescape(page(response))
    assert "unknown filter parameter 'ts_from'" in html
    for known in ("room", "type", "source", "target", "participant", "between", "since"):
        assert f"<code>{known}</code>" in html
    assert "First line of the report." not in html


def test_a_misspelt_filter_parameter_gets_the_closest_known_one(admin_client, entry):
    html = unescape(page(admin_client.get(LIST + "?sourse=web-app")))

    assert "unknown filter parameter 'sourse'; did you mean source?" in html


def test_pagination_links_keep_the_filters(admin_client, team):
    send_many(team, 120, text="paged {i}")

    html = unescape(page(admin_client.get(LIST + "?room=team&source=web-app&q=paged")))

    links = set(re.findall(r'href="(\?[^"]*p=\d+[^"]*)"', html))
    assert links, "no page links on a list of 120 entries"
    for link in links:
        assert "room=team" in link and "source=web-app" in link and "q=paged" in link


def test_the_second_page_continues_where_the_first_stopped(admin_client, team):
    send_many(team, 60, text="row-{i:03d}")

    first = page(admin_client.get(LIST + "?source=web-app"))
    second = page(admin_client.get(LIST + "?source=web-app&p=2"))

    assert "row-059" in first and "row-010" in first and "row-009" not in first
    assert "row-009" in second and "row-000" in second and "row-059" not in second


def test_the_entry_page_link_back_keeps_the_filters(admin_client, entry):
    html = unescape(page(admin_client.get(LIST + "?room=team")))

    link = re.search(rf'href="([^"]*{entry.id}/change/[^"]*)"', html).group(1)
    assert "_changelist_filters=room%3Dteam" in link


def test_the_count_stops_at_the_cap_and_says_more_than(admin_client, team, monkeypatch):
    monkeypatch.setattr(bus_admin, "COUNT_CAP", 5)
    send_many(team, 8)

    html = page(admin_client.get(LIST))

    assert "more than 5 entries" in html


def test_the_list_never_counts_the_whole_table(admin_client, team):
    send_many(team, 3)

    with CaptureQueriesContext(connection) as queries:
        page(admin_client.get(LIST + "?room=team"))

    counts = [q["sql"] for q in queries if "COUNT(" in q["sql"].upper()]
    assert counts, "the list should count (boundedly)"
    for sql in counts:
        assert "LIMIT" in sql.upper(), sql


def test_a_count_that_runs_out_of_time_lists_the_page_and_says_not_counted(
    admin_client, team, monkeypatch
):
    send_many(team, 3, text="budget {i}")

    @contextmanager
    def exhausted(seconds, using="default"):
        raise bus_admin.BudgetExceeded
        yield

    monkeypatch.setattr(bus_admin, "time_budget", exhausted)

    html = page(admin_client.get(LIST))

    assert "not counted" in html
    assert "budget 2" in html and "budget 0" in html


def test_the_time_budget_stops_a_long_query():
    if connection.vendor == "postgresql":
        slow = "SELECT pg_sleep(2)"
    else:
        slow = (
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 50000000) "
            "SELECT count(*) FROM c"
        )
    started = time.monotonic()

    with (
        pytest.raises(bus_admin.BudgetExceeded),
        bus_admin.time_budget(0.05),
        connection.cursor() as cursor,
    ):
        cursor.execute(slow)

    assert time.monotonic() - started < 1.5
    with connection.cursor() as cursor:  # the connection is usable afterwards
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)


def test_the_time_budget_lets_a_quick_query_through():
    with bus_admin.time_budget(5), connection.cursor() as cursor:
        cursor.execute("SELECT 2")
        assert cursor.fetchone() == (2,)


def test_quick_range_links_keep_the_other_filters(admin_client, entry):
    html = unescape(page(admin_client.get(LIST + "?room=team&until=2030-01-01")))

    link = re.search(r'<a href="(\?[^"]*)">last hour</a>', html).group(1)
    assert "room=team" in link and "since=" in link and "until=" not in link


def test_the_filter_form_shows_the_values_in_use(admin_client, entry):
    html = page(admin_client.get(LIST + "?source=web-app&between=web-app%2Capi"))

    assert 'name="source" value="web-app"' in html
    assert 'name="between" value="web-app,api"' in html


# ---------------------------------------------------------------- rooms, seats, static


def test_the_rooms_page_lists_rooms_with_entry_counts(admin_client, entry):
    html = page(admin_client.get("/admin/bus/room/"))

    assert "team" in html
    assert "?room=team" in html


def test_the_seats_page_shows_liveness_focus_and_quiet(admin_client, team):
    services.seats.declare_focus(seat=team, text="fixing the login form", phase="apply")
    services.seats.set_quiet(seat=team, duration=timedelta(hours=2))

    html = page(admin_client.get("/admin/bus/seat/"))

    assert "web-app#aaaa1111" in html
    assert "salon-live-live" in html
    assert "fixing the login form [apply]" in html
    assert "quiet until" in html


def test_a_seat_page_shows_its_rooms(admin_client, team):
    seat = Seat.objects.get(name="web-app#aaaa1111")

    html = page(admin_client.get(f"/admin/bus/seat/{seat.pk}/change/"))

    assert "team" in html


def test_mcp_sessions_have_a_read_only_page_when_the_model_exists(admin_client):
    models = pytest.importorskip("mcpgate.models")
    if not hasattr(models, "McpSession"):
        pytest.skip("mcpgate.models.McpSession does not exist yet")

    assert admin_client.get("/admin/mcpgate/mcpsession/").status_code == 200
    # No add page (and no page keyed by a session id at all: the list is the whole view).
    assert admin_client.get("/admin/mcpgate/mcpsession/add/").status_code == 404


def test_the_admin_static_files_are_served_without_collectstatic(client):
    response = client.get("/static/admin/css/base.css")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/css")


def test_a_missing_static_file_is_404(client):
    assert client.get("/static/admin/css/nope.css").status_code == 404
    assert client.get("/static/../salon/settings.py").status_code == 404


def test_the_login_page_renders_with_the_salon_title(client):
    html = page(client.get("/admin/login/"))

    assert "agent-salon" in html


def test_a_session_keeps_only_the_name_and_version_of_its_client(db):
    from mcpgate import sessions

    session = sessions.create_session(
        label="web",
        rooms=[],
        version="2025-11-25",
        client_info={"name": "claude-code", "version": "2.1", "blob": "x" * 10_000},
    )

    assert session.client_info == {"name": "claude-code", "version": "2.1"}
