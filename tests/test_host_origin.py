"""One Host/Origin rule for every Django path (salon.middleware), the one /mcp applies:
a DNS-rebinding page or a cross-site request gets a clean 403, and nothing is stored."""

from __future__ import annotations

import logging

import pytest

from bus.models import Entry
from tests.factories import make_room

pytestmark = pytest.mark.django_db

EVIL = {"HTTP_HOST": "evil.example:9315", "HTTP_ORIGIN": "http://evil.example:9315"}


def post_notify(client, **headers):
    return client.post(
        "/notify?label=ci", data=b'{"content": "hi"}', content_type="application/json", **headers
    )


@pytest.fixture
def salon_room():
    return make_room("salon")


def test_notify_refuses_a_foreign_host_with_json_and_stores_nothing(client, salon_room):
    response = post_notify(client, **EVIL)

    assert response.status_code == 403
    assert "evil.example" in response.json()["error"]
    assert "AGENT_SALON_ALLOWED_HOSTS" in response.json()["error"]
    assert not Entry.objects.exists()


def test_notify_refuses_a_foreign_origin(client, salon_room):
    response = post_notify(client, HTTP_ORIGIN="http://evil.example")

    assert response.status_code == 403 and not Entry.objects.exists()


def test_notify_takes_an_allowed_origin(client, salon_room):
    assert post_notify(client, HTTP_ORIGIN="http://localhost:9315").status_code == 202


@pytest.mark.parametrize("path", ["/admin/", "/admin/login/"])
def test_the_admin_refuses_a_foreign_host_with_a_plain_page(client, path):
    response = client.get(path, HTTP_HOST="evil.example")

    assert response.status_code == 403
    assert response["content-type"].startswith("text/plain")
    assert b"evil.example" in response.content


def test_the_admin_refuses_an_opaque_origin(client):
    assert client.get("/admin/login/", HTTP_ORIGIN="null").status_code == 403


@pytest.mark.parametrize("path", ["/healthz", "/metrics", "/notify?label=ci", "/admin/login/"])
def test_a_malformed_host_is_refused_without_a_traceback(client, path, caplog, settings):
    settings.MCP_ALLOWED_HOSTS = [*settings.MCP_ALLOWED_HOSTS, "bad_host!"]
    with caplog.at_level(logging.DEBUG):
        response = client.get(path, HTTP_HOST="bad_host!")

    assert response.status_code in (400, 403)
    assert not [r for r in caplog.records if r.exc_info]


def test_a_request_without_host_or_origin_goes_through(client):
    assert client.get("/healthz").status_code == 200  # the test client sends no Host


def test_an_empty_host_is_a_clean_400(client, caplog):
    with caplog.at_level(logging.DEBUG):
        response = client.get("/healthz", HTTP_HOST="")

    assert response.status_code == 400
    assert not [r for r in caplog.records if r.exc_info]


def test_the_relays_api_is_reached_by_its_own_name_but_never_by_a_malformed_host(client):
    """/relay/v1/ is called from other machines by the relay's public name, with a device
    token or an invite in every request: the allow-list does not apply there."""
    by_name = client.get("/relay/v1/", HTTP_HOST="relay.example.org")
    malformed = client.get("/relay/v1/", HTTP_HOST="bad_host!")

    assert by_name.status_code != 403
    assert malformed.status_code == 400
