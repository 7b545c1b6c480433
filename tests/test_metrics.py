"""/metrics (Prometheus text format 0.0.4, from prometheus-client's registry), and
/healthz's answer when the database does not answer."""

from __future__ import annotations

import json
import os
import re
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from django.db import OperationalError, connection
from prometheus_client import REGISTRY

from bus import services
from mcpgate import metrics as serving
from salon import metrics
from salond.metrics import REQUEST_SECONDS
from tests.factories import RoomFactory

# One sample line: name{labels} value
SAMPLE = re.compile(
    r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*",?)*\})? '
    r"(-?[0-9.e+]+|\+Inf|-Inf|NaN)$"
)


def assert_exposition(text: str) -> None:
    """Every line is a HELP, a TYPE or a sample line; every metric is typed before use."""
    assert text.endswith("\n")
    typed = set()
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram")
            typed.add(name)
            continue
        assert SAMPLE.match(line), line
        base = re.sub(r"(_bucket|_sum|_count)$", "", line.split("{")[0].split(" ")[0])
        assert base in typed or line.split("{")[0].split(" ")[0] in typed, line


def sample(text: str, name: str, **labels) -> float | None:
    """The value of the series `name` with exactly these labels, or None."""
    wanted = {k: str(v) for k, v in labels.items()}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        head, _, rest = series.partition("{")
        found = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', rest))
        if head == name and found == wanted:
            return float(value)
    return None


# ---------------------------------------------------------------- what is exposed


def value(name: str, **labels) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0


def test_the_serving_metrics_are_exposed_at_zero_before_first_use():
    text = metrics.render().decode()

    for name in ("salon_pushes_total", "salon_push_failures_total", "salon_live_streams"):
        assert sample(text, name) is not None
        assert f"# HELP {name} " in text
    assert "# TYPE salon_wake_decisions_total counter" in text
    assert "# TYPE salon_request_duration_seconds histogram" in text
    assert_exposition(text)


def test_a_push_counts_once_and_a_stream_is_a_gauge_that_goes_both_ways():
    pushes, streams = value("salon_pushes_total"), value("salon_live_streams")

    serving.PUSHES.inc()
    serving.LIVE_STREAMS.inc()
    serving.LIVE_STREAMS.inc()
    serving.LIVE_STREAMS.dec()

    text = metrics.render().decode()
    assert sample(text, "salon_pushes_total") == pushes + 1
    assert sample(text, "salon_live_streams") == streams + 1
    serving.LIVE_STREAMS.dec()


def test_request_latency_has_cumulative_buckets_by_route():
    route = "/a-route-of-this-test"
    for seconds in (0.003, 0.02, 0.02, 0.7, 30):
        REQUEST_SECONDS.labels(path=route).observe(seconds)

    text = metrics.render().decode()

    name = "salon_request_duration_seconds"
    assert sample(text, f"{name}_bucket", le="0.005", path=route) == 1
    assert sample(text, f"{name}_bucket", le="0.025", path=route) == 3
    assert sample(text, f"{name}_bucket", le="1.0", path=route) == 4
    assert sample(text, f"{name}_bucket", le="+Inf", path=route) == 5
    assert sample(text, f"{name}_count", path=route) == 5
    assert sample(text, f"{name}_sum", path=route) == pytest.approx(30.743)


# ---------------------------------------------------------------- the endpoint


@pytest.mark.django_db
def test_metrics_answers_prometheus_text(client):
    response = client.get("/metrics")

    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert_exposition(response.content.decode())


@pytest.mark.django_db
def test_entries_total_is_every_entry_stored_in_every_room(client):
    RoomFactory(name="team", last_seq=0)
    RoomFactory(name="ops")
    seat = services.seats.check_in(agent="ci")
    for room in ("team", "team", "ops"):
        services.entries.send_entry(seat=seat, text="x", room=room)

    text = client.get("/metrics").content.decode()

    assert sample(text, "salon_entries_total") == 3
    assert sample(text, "salon_database_up") == 1


@pytest.mark.django_db
def test_wake_decisions_are_counted_by_reason_once_committed(
    client, django_capture_on_commit_callbacks
):
    RoomFactory(name="team")
    writer = services.seats.check_in(agent="web-app", session_id="aaaa1111")
    reader = services.seats.check_in(agent="api", session_id="bbbb2222")
    for seat in (writer, reader):
        services.rooms.join_room(seat=seat, room="team")
    before_claim = value("salon_wake_decisions_total", reason="claim")
    before_fact = value("salon_wake_decisions_total", reason="not_a_claim")

    with django_capture_on_commit_callbacks(execute=True):
        services.entries.send_entry(seat=writer, text="who?", room="team", type="QUESTION")
        services.entries.send_entry(seat=writer, text="fyi", room="team", type="FACT")

    text = client.get("/metrics").content.decode()
    assert sample(text, "salon_wake_decisions_total", reason="claim") == before_claim + 1
    assert sample(text, "salon_wake_decisions_total", reason="not_a_claim") == before_fact + 1


@pytest.mark.django_db
def test_a_rolled_back_send_counts_no_decision(django_capture_on_commit_callbacks):
    RoomFactory(name="team")
    writer = services.seats.check_in(agent="web-app", session_id="aaaa1111")
    reader = services.seats.check_in(agent="api", session_id="bbbb2222")
    for seat in (writer, reader):
        services.rooms.join_room(seat=seat, room="team")
    before = value("salon_wake_decisions_total", reason="claim")

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.entries.send_entry(seat=writer, text="who?", room="team", type="QUESTION")

    # Not committed (the callbacks were not run): nothing counted yet.
    assert callbacks
    assert value("salon_wake_decisions_total", reason="claim") == before


@pytest.mark.django_db
def test_requests_are_timed_by_route_not_by_raw_path(client):
    name = "salon_request_duration_seconds"
    before = value(f"{name}_count", path="/healthz")

    client.get("/healthz")
    client.get("/healthz?x=1")
    client.get("/no/such/page/123")

    text = client.get("/metrics").content.decode()
    assert sample(text, f"{name}_count", path="/healthz") == before + 2
    assert sample(text, f"{name}_count", path="unmatched") >= 1
    assert "/no/such/page/123" not in text


@pytest.mark.django_db
def test_the_admin_detail_route_is_one_series_for_every_entry(admin_client):
    admin_client.get("/admin/bus/entry/0190f0f0-0000-7000-8000-000000000001/change/")
    admin_client.get("/admin/bus/entry/0190f0f0-0000-7000-8000-000000000002/change/")

    text = metrics.render().decode()

    assert "0190f0f0" not in text
    assert "/admin/bus/entry/<path:object_id>/change/" in text


def _broken_cursor(*args, **kwargs):
    raise OperationalError("unable to open database file")


@pytest.mark.django_db
def test_metrics_still_answers_when_the_database_does_not(client, monkeypatch):
    monkeypatch.setattr(connection, "cursor", _broken_cursor)

    response = client.get("/metrics")

    assert response.status_code == 200
    text = response.content.decode()
    assert sample(text, "salon_database_up") == 0
    assert sample(text, "salon_entries_total") is None  # not reported as a reset to 0
    assert_exposition(text)


# ---------------------------------------------------------------- /healthz


@pytest.mark.django_db
def test_healthz_is_200_ok_when_the_database_answers(client):
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"ok": True, "db": "ok"}


@pytest.mark.django_db
def test_healthz_is_503_with_json_when_the_database_does_not_answer(client, monkeypatch):
    monkeypatch.setattr(connection, "cursor", _broken_cursor)

    response = client.get("/healthz")

    assert response.status_code == 503
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"ok": False, "db": "unable to open database file"}


@pytest.mark.slow
def test_a_daemon_whose_database_stopped_answering_answers_503(daemon, env, tmp_path):
    assert httpx.get(daemon.url + "/healthz", timeout=5).status_code == 200

    with database_unreachable(env, tmp_path):
        # The daemon reuses a successful check for up to a second (salon.health.MAX_AGE).
        deadline = time.monotonic() + 10
        while True:
            response = httpx.get(daemon.url + "/healthz", timeout=5)
            if response.status_code != 200 or time.monotonic() > deadline:
                break
            time.sleep(0.1)

    assert response.status_code == 503
    assert response.json()["ok"] is False
    assert isinstance(response.json()["db"], str)
    assert httpx.get(daemon.url + "/healthz", timeout=5).status_code == 200


@contextmanager
def database_unreachable(env: dict[str, str], tmp_path: Path):
    """Make the daemon's next connection fail, then put things back."""
    url = env.get("DATABASE_URL")
    if url:
        import psycopg

        admin_url, name = os.environ["DATABASE_URL"], url.rsplit("/", 1)[-1]
        with psycopg.connect(admin_url, autocommit=True) as db:
            db.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
            db.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (name,),
            )
            try:
                yield
            finally:
                db.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')
        return
    # SQLite: swap the file for one that is not a database (and its WAL files away).
    db = Path(env["AGENT_SALON_DB"])
    moved = [(p, tmp_path / ("moved-" + p.name)) for p in db.parent.glob(db.name + "*")]
    for path, aside in moved:
        path.rename(aside)
    db.write_bytes(b"this is not a database" * 100)
    try:
        yield
    finally:
        db.unlink()
        for path, aside in moved:
            aside.rename(path)


# ---------------------------------------------------------------- /healthz on the ASGI path


def _asgi_get(path="/healthz", method="GET", headers=((b"host", b"127.0.0.1:8377"),)):
    import asyncio

    from salon.health import asgi_healthz

    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "path": path, "method": method, "headers": list(headers)}
    asyncio.run(asgi_healthz(scope, receive, send))
    start, body = sent
    return start["status"], dict(start["headers"]), body["body"]


@pytest.fixture
def fresh_health(monkeypatch):
    from salon import health

    monkeypatch.setattr(health, "health", health.Health())
    return health


@pytest.mark.django_db(transaction=True)
def test_the_daemons_healthz_answers_ok_and_is_timed(fresh_health):
    name = "salon_request_duration_seconds"
    before = value(f"{name}_count", path="/healthz") or 0

    status, headers, body = _asgi_get()

    assert status == 200
    assert headers[b"content-type"] == b"application/json"
    assert json.loads(body) == {"ok": True, "db": "ok"}
    assert value(f"{name}_count", path="/healthz") == before + 1


@pytest.mark.django_db(transaction=True)
def test_the_daemons_healthz_refuses_a_foreign_host_and_other_methods(fresh_health):
    status, _, body = _asgi_get(headers=[(b"host", b"evil.example")])
    assert status == 403
    assert "not allowed" in json.loads(body)["error"]

    status, headers, _ = _asgi_get(method="POST")
    assert status == 405
    assert headers[b"allow"] == b"GET, HEAD"


@pytest.mark.django_db(transaction=True)
def test_the_daemons_healthz_says_503_and_never_reuses_a_failure(fresh_health, monkeypatch):
    calls = []

    def probe():
        calls.append(1)
        return "unable to open database file" if len(calls) <= 2 else None

    monkeypatch.setattr(fresh_health, "_probe", probe)

    assert _asgi_get()[0] == 503
    status, _, body = _asgi_get()
    assert (status, json.loads(body)) == (503, {"ok": False, "db": "unable to open database file"})
    assert _asgi_get()[0] == 200
    assert _asgi_get()[0] == 200  # a success is reused (MAX_AGE): no fourth check
    assert len(calls) == 3
