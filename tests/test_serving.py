"""salon.serving in-process: the access log's lines and the open-bind warning."""

from __future__ import annotations

import logging

import pytest

from bus import services
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
    assert serving.open_bind_warning("0.0.0.0") is None
    services.tokens.revoke_tokens(label="ci")
    assert "no active token" in serving.open_bind_warning("0.0.0.0")
    assert serving.open_bind_warning("127.0.0.1") is None
