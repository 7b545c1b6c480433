"""The /notify request, parsed and checked: pure, no Django, no database.

`parse_notify` turns a raw POST (content type + body bytes) into a `Notify` or raises
`NotifyError` carrying the HTTP status the README's "The webhook" lists and a message
that says how to fix it.
What the bus itself refuses (an unknown room, an unknown addressee, empty content, a bad
type) is left to bus.services; this module only checks the envelope.

Decisions where the spec is silent:

* A body key outside the documented set is refused (422, naming it), except `source`,
  `from` and `ts`, which a caller may send and which are ignored: the server fills in
  the sender (the `label`) and the time. A typo such as `"romo"` must not silently post
  to the default room.
* `target` (a string) and `to` (a string or a list of strings) are merged, in that
  order, duplicates dropped; `null` means absent for every optional field.
* `application/json` and any `+json` media type are JSON; a charset other than UTF-8 is
  refused (415). A leading UTF-8 byte-order mark is tolerated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NoReturn

from bus import strict

MAX_BODY_BYTES = 4 * 1024 * 1024

FIELDS = ("content", "target", "to", "room", "type", "re", "meta")
IGNORED_FIELDS = ("source", "from", "ts")

EXAMPLE = '{"content": "build 812 is green", "to": ["web-app"]}'


class NotifyError(Exception):
    """A refused /notify request: HTTP status, message, and extra JSON fields (lists)."""

    def __init__(self, status: int, message: str, **extra: Any):
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return {"error": self.message, **self.extra}


@dataclass
class Notify:
    content: str
    to: list[str] = field(default_factory=list)
    room: str | None = None
    type: str | None = None
    re: str | None = None
    meta: dict[str, Any] | None = None


def check_size(content_length: str | None) -> None:
    """Refuse a declared Content-Length over the limit before the body is read."""
    try:
        declared = int(content_length) if content_length else 0
    except ValueError:
        declared = 0
    if declared > MAX_BODY_BYTES:
        too_large(declared)


def too_large(size: int) -> NoReturn:
    raise NotifyError(
        413,
        f"request body is {size} bytes; the limit is {MAX_BODY_BYTES} bytes (4 MiB), "
        "and an entry's content at most 64 KiB: shorten it, or put the detail in a file "
        "and send its path",
        limit=MAX_BODY_BYTES,
    )


def check_content_type(content_type: str | None) -> None:
    media, charset = strict.media_type(content_type)
    if media != "application/json" and not media.endswith("+json"):
        shown = strict.shown(media, 64) if media else "none"
        raise NotifyError(
            415,
            f"Content-Type is {shown}; /notify takes JSON: send the header "
            f"'Content-Type: application/json' with a body like {EXAMPLE}",
        )
    if not strict.utf8_charset(charset):
        raise NotifyError(
            415,
            f"charset {strict.shown(charset, 32)} is not supported: send the JSON body as "
            "UTF-8 (Content-Type: application/json; charset=utf-8)",
        )


def decode(body: bytes) -> object:
    """The body as JSON, by bus.strict's rules (shared with /mcp)."""
    try:
        return strict.decode_json(body, max_bytes=MAX_BODY_BYTES)
    except strict.TooLarge as exc:
        too_large(exc.size)
    except strict.NotJson as exc:
        raise NotifyError(400, f"request body is not valid JSON ({exc}): send {EXAMPLE}") from None


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _shape(name: str, wanted: str, value: object) -> NoReturn:
    raise NotifyError(
        422,
        f"field {name!r} must be {wanted}, got {_kind(value)}: e.g. {EXAMPLE}",
        field=name,
    )


def _optional_str(data: dict, name: str) -> str | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        _shape(name, "a string", value)
    return value


def parse_notify(data: object) -> Notify:
    """Check the shape of a decoded /notify body (types only; the bus checks values)."""
    if not isinstance(data, dict):
        raise NotifyError(
            422,
            f"the body must be a JSON object, got {_kind(data)}: send {EXAMPLE}",
            field="body",
        )
    _refuse_unknown_fields(data)
    content, to = _content(data), _addressees(data)
    meta = data.get("meta")
    if meta is not None and not isinstance(meta, dict):
        _shape("meta", 'a JSON object (e.g. {"kind": "question"})', meta)
    return Notify(
        content=content,
        to=to,
        room=_optional_str(data, "room") or None,
        type=_optional_str(data, "type") or None,
        re=_optional_str(data, "re") or None,
        meta=meta,
    )


def _refuse_unknown_fields(data: dict) -> None:
    unknown = [k for k in data if k not in FIELDS and k not in IGNORED_FIELDS]
    if unknown:
        name = unknown[0][:64]
        raise NotifyError(
            422,
            f"unknown field {name!r}: /notify takes {', '.join(FIELDS)} "
            "(the sender is the ?label= of the URL)",
            field=name,
            fields=list(FIELDS),
        )


def _content(data: dict) -> str:
    if "content" not in data or data["content"] is None:
        raise NotifyError(
            422,
            f"field 'content' is missing: it holds the message text, e.g. {EXAMPLE}",
            field="content",
        )
    content = data["content"]
    if not isinstance(content, str):
        _shape("content", "a string (the message text)", content)
    return content


def _addressees(data: dict) -> list[str]:
    """`target` (agent-salon's one addressee) and `to` (a name or a list), merged in
    order, blanks and repeats dropped."""
    to: list[str] = []
    target = _optional_str(data, "target")
    if target is not None:
        to.append(target)
    raw_to = data.get("to")
    wanted = "a string or a list of strings (seat or agent names)"
    if isinstance(raw_to, str):
        to.append(raw_to)
    elif isinstance(raw_to, list):
        for item in raw_to:
            if not isinstance(item, str):
                _shape("to", wanted, item)
            to.append(item)
    elif raw_to is not None:
        _shape("to", wanted, raw_to)
    return list(dict.fromkeys(n for n in (t.strip() for t in to) if n))
