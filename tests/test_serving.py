"""salon.serving in-process: the access log's lines, the open-bind warning, and the daphne
Server's application check over the connections that changed."""

from __future__ import annotations

import asyncio
import logging

import pytest

from bus import services
from patches import daphne
from salon import serving


def logged(caplog, details: dict) -> str:
    with caplog.at_level(logging.INFO, logger="salon.access"):
        serving.log_access("http", "complete", details)
    return caplog.text


def test_an_access_line_escapes_control_characters_and_clips_the_path(caplog):
    path = "/healthz?q=" + "A\x7f\n" * 1000
    text = logged(caplog, {"client": "127.0.0.1:5", "method": "GET", "path": path, "status": 200})

    (line,) = [line for line in text.splitlines() if "/healthz" in line]
    assert "\x7f" not in line and "A\\x7f\\n" in line
    assert len(line) < 3 * serving.ACCESS_PATH_CHARS and "characters)" in line


def test_an_access_line_is_never_an_exception(caplog):
    logged(caplog, {"path": object(), "time_taken": "soon", "status": None})
    serving.log_access("websocket", "connected", {})


@pytest.mark.parametrize(
    ("bind", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("0", False),
        ("::", False),
        ("salon.example.org", False),
    ],
)
def test_only_loopback_addresses_stay_on_this_machine(bind, loopback):
    assert serving.loopback(bind) is loopback


@pytest.mark.django_db
def test_the_open_bind_warning_counts_active_tokens_only():
    assert "WARNING" in serving.open_bind_warning("0.0.0.0")
    services.tokens.issue_token(label="ci")
    services.tokens.revoke_tokens(label="ci")
    assert "no active token" in serving.open_bind_warning("0.0.0.0")
    assert serving.open_bind_warning("127.0.0.1") is None


@pytest.mark.django_db
def test_the_open_bind_warning_names_the_labels_that_write_without_a_token(settings):
    for agent in ("web-app", "ci", "api"):
        services.seats.check_in(agent=agent, session_id="aaaa1111bbbb2222")
    services.tokens.issue_token(label="ci")
    warning = serving.open_bind_warning("0.0.0.0")
    assert "labels without a token can write: api, web-app and any new label" in warning
    settings.REQUIRE_TOKENS = True
    assert serving.open_bind_warning("0.0.0.0") is None


# -- the application check (patches.daphne.lean_server_class) ------------------------


class _Connection:
    """What the application check touches of a daphne protocol."""

    transport = None  # not a TCP connection: left as it is

    def __init__(self):
        self.errors: list[BaseException] = []

    def handle_exception(self, exception):
        self.errors.append(exception)


@pytest.fixture
def lean_server(monkeypatch):
    server_class = daphne.lean_server_class()
    from twisted.internet import reactor

    monkeypatch.setattr(reactor, "callLater", lambda *args, **kwargs: None)  # no next round
    server = server_class(application=None, endpoints=["tcp:port=0:interface=127.0.0.1"])
    server.connections = {}  # as run() starts it
    return server


async def _turn():
    for _ in range(3):  # the app's step, then its done-callback
        await asyncio.sleep(0)


async def _opened(server, app) -> _Connection:
    """A connection whose application `app` was created by the server and has started."""
    connection = _Connection()
    server.application = lambda scope, receive, send: app()
    server.protocol_connected(connection)
    server.create_application(connection, {"type": "http"})
    await _turn()
    return connection


async def _finishes():
    return None


async def _runs_on():
    await asyncio.Event().wait()


async def test_a_finished_application_is_reaped_and_its_connection_forgotten_once_closed(
    lean_server,
):
    connection = await _opened(lean_server, _finishes)
    lean_server.application_checker()
    assert "application_instance" not in lean_server.connections[connection]  # reaped
    lean_server.protocol_disconnected(connection)
    lean_server.application_checker()
    assert connection not in lean_server.connections


async def test_a_running_application_whose_client_left_is_cancelled_after_the_close_timeout(
    lean_server,
):
    connection = await _opened(lean_server, _runs_on)
    lean_server.protocol_disconnected(connection)
    lean_server.application_checker()
    instance = lean_server.connections[connection]["application_instance"]
    assert not instance.done()  # within the close timeout: left running, looked at again
    assert connection in lean_server.changed

    lean_server.application_close_timeout = -1
    lean_server.application_checker()
    await _turn()
    assert instance.cancelled()
    lean_server.application_checker()
    assert connection not in lean_server.connections


async def test_an_untouched_open_connection_is_not_looked_at_and_keeps_its_application(
    lean_server,
):
    connection = await _opened(lean_server, _runs_on)
    for _ in range(3):
        lean_server.application_checker()
    assert lean_server.changed == set()
    instance = lean_server.connections[connection]["application_instance"]
    assert not instance.done()
    instance.cancel()


async def test_an_applications_exception_is_logged_and_handed_to_its_open_connection(
    lean_server, caplog
):
    async def fails():
        raise ValueError("broken consumer")

    connection = await _opened(lean_server, fails)
    with caplog.at_level(logging.ERROR, logger="daphne.server"):
        lean_server.application_checker()
    assert [str(e) for e in connection.errors] == ["broken consumer"]
    assert "Exception inside application: broken consumer" in caplog.text
    assert "application_instance" not in lean_server.connections[connection]


def test_twisted_does_not_parse_post_bodies_daphne_hands_them_on_raw(lean_server):
    """Twisted's form parsing (the Content-Type through the email package, per POST)
    is off for every connection; Django reads forms from the body daphne passes on."""
    connection = _Connection()
    connection._parsePOSTFormSubmission = True  # Twisted's default for a new request
    lean_server.protocol_connected(connection)
    assert connection._parsePOSTFormSubmission is False
