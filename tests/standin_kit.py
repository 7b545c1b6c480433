"""What the stand-ins for the agent CLIs' model APIs share (tests/*_cli/standin.py): an
HTTP server on 127.0.0.1 that records every request and answers from a script.

A script is a list of replies taken one per model request (`when_done` once it runs
out), or a function that looks at the request and decides. Each stand-in says what a
reply is and how it is written on the wire.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedServer:
    """A stand-in's server: `handler` answers, `record` and `next_reply` serve it."""

    def __init__(self, script: list | Callable, handler: type[BaseHTTPRequestHandler]):
        self.requests: list = []
        self._lock = threading.Lock()
        self.use(script)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._server.stand_in = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def use(self, script: list | Callable) -> None:
        """Answer from now on from `script` (a test's function that needs its fixtures)."""
        with self._lock:
            self.script = script
            self._turns = iter(script) if isinstance(script, list) else None

    def record(self, request) -> None:
        with self._lock:
            self.requests.append(request)

    def recorded(self, keep: Callable[[Any], bool]) -> list:
        with self._lock:
            return [r for r in self.requests if keep(r)]

    def next_reply(self, request, when_done):
        """The script's reply to `request`: the function's, or the list's next."""
        if self._turns is None:
            return self.script(request)
        with self._lock:
            return next(self._turns, when_done)


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet handler that reads a JSON body and writes JSON or server-sent events."""

    protocol_version = "HTTP/1.1"

    @property
    def stand_in(self):
        return self.server.stand_in  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        pass

    def read_json(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_unparsed": raw.decode(errors="replace")}
        return body if isinstance(body, dict) else {}

    def send_json(self, payload: Any, status: int = 200) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_events(
        self, events: Iterable[Any], *, done: str | None = None, named: bool = False
    ) -> None:
        """Server-sent events, one `data:` line each (`named`: after an `event:` line with
        the event's `type`; `done`: a last literal event)."""
        lines = [
            (f"event: {event['type']}\n" if named else "") + f"data: {json.dumps(event)}\n\n"
            for event in events
        ]
        if done is not None:
            lines.append(f"data: {done}\n\n")
        data = "".join(lines).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
