"""/metrics (Prometheus text format 0.0.4), the in-process registry behind it, and
/healthz's answer when the database does not answer (SPEC §11)."""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from django.db import OperationalError, connection

from bus import services
from salon import metrics
from salon.metrics import Registry
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


# ---------------------------------------------------------------- the registry


def test_a_counter_adds_up_per_label_set():
    registry = Registry()
    registry.inc("salon_pushes_total")
    registry.inc("salon_pushes_total", amount=2)
    registry.inc("jobs_total", kind="a")
    registry.inc("jobs_total", kind="b", amount=5)

    text = registry.render()

    assert sample(text, "salon_pushes_total") == 3
    assert sample(text, "jobs_total", kind="a") == 1
    assert sample(text, "jobs_total", kind="b") == 5
    assert "# TYPE jobs_total counter" in text
    assert_exposition(text)


def test_a_counter_cannot_go_down():
    with pytest.raises(ValueError, match="only go up"):
        Registry().inc("salon_pushes_total", amount=-1)


def test_a_gauge_is_set_not_added():
    registry = Registry()
    registry.set_gauge("salon_live_streams", 4)
    registry.set_gauge("salon_live_streams", 2)

    assert sample(registry.render(), "salon_live_streams") == 2


def test_a_histogram_has_cumulative_buckets_sum_and_count():
    registry = Registry()
    for seconds in (0.003, 0.02, 0.02, 0.7, 30):
        registry.observe("salon_request_duration_seconds", seconds, path="/notify")

    text = registry.render()

    name = "salon_request_duration_seconds"
    assert sample(text, f"{name}_bucket", le="0.005", path="/notify") == 1
    assert sample(text, f"{name}_bucket", le="0.025", path="/notify") == 3
    assert sample(text, f"{name}_bucket", le="1", path="/notify") == 4
    assert sample(text, f"{name}_bucket", le="10", path="/notify") == 4
    assert sample(text, f"{name}_bucket", le="+Inf", path="/notify") == 5
    assert sample(text, f"{name}_count", path="/notify") == 5
    assert sample(text, f"{name}_sum", path="/notify") == pytest.approx(30.743)
    assert "# TYPE salon_request_duration_seconds histogram" in text
    assert_exposition(text)


def test_declared_metrics_are_exposed_at_zero_before_first_use():
    text = Registry().render()

    for name in ("salon_pushes_total", "salon_push_failures_total", "salon_live_streams"):
        assert sample(text, name) == 0
        assert f"# HELP {name} " in text
    assert "# TYPE salon_wake_decisions_total counter" in text


def test_a_metric_keeps_one_type():
    registry = Registry()
    registry.set_gauge("things", 1)

    with pytest.raises(ValueError, match="gauge"):
        registry.inc("things")


@pytest.mark.parametrize("name", ["bad-name", "9lives", "a b"])
def test_a_name_that_prometheus_would_refuse_is_refused(name):
    with pytest.raises(ValueError):
        Registry().inc(name)


def test_label_values_are_escaped():
    registry = Registry()
    registry.inc("odd_total", path='a"b\\c\nd')

    text = registry.render()

    assert 'odd_total{path="a\\"b\\\\c\\nd"} 1' in text
    assert_exposition(text)


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
    seat = services.check_in(agent="ci")
    for room in ("team", "team", "ops"):
        services.send_entry(seat=seat, text="x", room=room)

    text = client.get("/metrics").content.decode()

    assert sample(text, "salon_entries_total") == 3
    assert sample(text, "salon_database_up") == 1


@pytest.mark.django_db
def test_wake_decisions_are_counted_by_reason_once_committed(
    client, django_capture_on_commit_callbacks
):
    RoomFactory(name="team")
    writer = services.check_in(agent="web-app", session_id="aaaa1111")
    reader = services.check_in(agent="api", session_id="bbbb2222")
    for seat in (writer, reader):
        services.join_room(seat=seat, room="team")
    before_claim = metrics.value("salon_wake_decisions_total", reason="claim")
    before_fact = metrics.value("salon_wake_decisions_total", reason="not_a_claim")

    with django_capture_on_commit_callbacks(execute=True):
        services.send_entry(seat=writer, text="who?", room="team", type="QUESTION")
        services.send_entry(seat=writer, text="fyi", room="team", type="FACT")

    text = client.get("/metrics").content.decode()
    assert sample(text, "salon_wake_decisions_total", reason="claim") == before_claim + 1
    assert sample(text, "salon_wake_decisions_total", reason="not_a_claim") == before_fact + 1


@pytest.mark.django_db
def test_a_rolled_back_send_counts_no_decision(django_capture_on_commit_callbacks):
    RoomFactory(name="team")
    writer = services.check_in(agent="web-app", session_id="aaaa1111")
    reader = services.check_in(agent="api", session_id="bbbb2222")
    for seat in (writer, reader):
        services.join_room(seat=seat, room="team")
    before = metrics.value("salon_wake_decisions_total", reason="claim")

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.send_entry(seat=writer, text="who?", room="team", type="QUESTION")

    # Not committed (the callbacks were not run): nothing counted yet.
    assert callbacks
    assert metrics.value("salon_wake_decisions_total", reason="claim") == before


@pytest.mark.django_db
def test_requests_are_timed_by_route_not_by_raw_path(client):
    name = "salon_request_duration_seconds"
    before = sample(metrics.render(), f"{name}_count", path="/healthz") or 0

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

    text = metrics.render()

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
        response = httpx.get(daemon.url + "/healthz", timeout=5)

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
