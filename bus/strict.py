"""Strict input and safe output: the checks every door of agent-salon shares.

/mcp, /notify, `salon mcp`'s stdin, the admin and the files `salon install` edits all
take input from outside through the functions here, so a rule holds at every door or
at none. Pure functions, standard library only: the hooks and the CLI import this on
every turn, and bus/, mcpgate/ and relay/ may all use it.

* A JSON document is UTF-8 (a leading byte-order mark is tolerated), one value, with no
  NaN or Infinity, no number longer than MAX_NUMBER_CHARS or beyond a float's range,
  no key twice in one object, nesting of at most MAX_JSON_DEPTH levels, and no lone
  UTF-16 surrogate escape. Anything else is refused as NotJson, with a reason a person
  can act on; the caller words the refusal for its door (an HTTP status, a JSON-RPC
  error, a command's message).
* Headers: the media type and charset of a Content-Type, a bearer token, Host and
  Origin against the allow-list (DNS rebinding), Last-Event-ID.
* Output: lone surrogates (which no UTF-8 encoder accepts) escaped, and values from
  outside escaped and clipped before they reach a log line.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Iterable, Sequence

TYPE_CHECKING = False  # not typing's: the hooks import this module, and not typing
if TYPE_CHECKING:
    from typing import NoReturn

# Python's JSON parser and encoder recurse once per level and stop near 1,000 levels of
# the whole stack: a document that parses must still leave room for its callers.
MAX_JSON_DEPTH = 512
# No client writes a number this long (a double needs at most 24 characters); Python's
# int() refuses 4,300 digits and more, and float() turns 1e400 into infinity.
MAX_NUMBER_CHARS = 64
MAX_TOKEN_CHARS = 512
MAX_EVENT_ID_DIGITS = 18  # fits a 64-bit integer: the ids are a per-seat counter
LOG_VALUE_CHARS = 200

# Only text with a \uD800-\uDFFF escape can decode to a lone surrogate.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


class NotJson(ValueError):
    """The input is not a JSON document agent-salon accepts; str() says why."""


class TooLarge(ValueError):
    """The input is over its size limit (bytes)."""

    def __init__(self, size: int, limit: int):
        super().__init__(f"{size} bytes, over the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class _Refused(Exception):
    """Raised from inside the parser's hooks; becomes NotJson."""


def _refuse(reason: str) -> NoReturn:
    raise _Refused(reason)


def _constant(name: str) -> NoReturn:
    _refuse(f"{name} is not JSON")


def _number(text: str) -> None:
    if len(text) > MAX_NUMBER_CHARS:
        _refuse(f"a number is longer than {MAX_NUMBER_CHARS} characters")


def _int(text: str) -> int:
    _number(text)
    return int(text)


def _float(text: str) -> float:
    _number(text)
    return _finite(text)


def _object(pairs: list[tuple[str, object]]) -> dict:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        _refuse(f"the key {shown(twice, 40)} appears twice in one object")
    return value


def decode_json(body: bytes, *, max_bytes: int | None = None) -> object:
    """One JSON document from UTF-8 bytes, strictly (see the module docstring).

    Raises TooLarge (only with max_bytes) or NotJson."""
    if max_bytes is not None and len(body) > max_bytes:
        raise TooLarge(len(body), max_bytes)
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise NotJson(f"not UTF-8, a bad byte at offset {exc.start}") from None
    if not text.strip():
        raise NotJson("it is empty")
    try:
        data = json.loads(
            text,
            parse_constant=_constant,
            parse_int=_int,
            parse_float=_float,
            object_pairs_hook=_object,
        )
    except json.JSONDecodeError as exc:
        raise NotJson(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except _Refused as exc:
        raise NotJson(str(exc)) from None
    except RecursionError:
        raise NotJson(f"nested more than {MAX_JSON_DEPTH} levels deep") from None
    if depth(data) > MAX_JSON_DEPTH:
        raise NotJson(f"nested more than {MAX_JSON_DEPTH} levels deep")
    if _SURROGATE_ESCAPE.search(text) and has_lone_surrogate(data):
        raise NotJson("a lone UTF-16 surrogate escape (\\ud800-\\udfff without its pair)")
    return data


# What a reader walks of a stored value: a row nested deeper reads as its text.
MAX_STORED_DEPTH = 64


def read_stored(text: str) -> object:
    """JSON the bus stored, read back for a reader that must never fail: the value, or
    `text` itself when it cannot be read safely (not JSON, nested beyond
    MAX_STORED_DEPTH, a number Python cannot hold or that overflows a float). The bus
    writes none of those, so such a row was changed outside it (and reads as tampered).

    Lenient where the bus may have been: a long number or a duplicate key written by an
    older version is read, not refused."""
    try:
        data = json.loads(text, parse_constant=_constant, parse_float=_finite)
    except (ValueError, RecursionError, _Refused):  # JSONDecodeError is a ValueError
        return text
    return text if depth(data) > MAX_STORED_DEPTH else data


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        _refuse(f"the number {text} is beyond the range of a 64-bit float")
    return value


def depth(value: object) -> int:
    """How deeply lists and objects nest: 0 for a scalar, 1 for [] or {}, 2 for [[]].

    Iterative: it measures what recursion could not."""
    deepest = 0
    pending: list[tuple[object, int]] = [(value, 1)]
    while pending:
        item, level = pending.pop()
        if isinstance(item, dict):
            children: Iterable = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        pending.extend((child, level + 1) for child in children)
    return deepest


def has_lone_surrogate(value: object) -> bool:
    """Does any string (or key) in this JSON value hold a lone surrogate?"""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)
    return False


# ---------------------------------------------------------------- headers


def media_type(content_type: str | None) -> tuple[str, str | None]:
    """(media type, charset) of a Content-Type, lower-cased; charset None when not given."""
    media, *params = (content_type or "").split(";")
    charset = None
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            charset = value.strip().strip('"').lower()
    return media.strip().lower(), charset


def utf8_charset(charset: str | None) -> bool:
    """Bodies are read as UTF-8: any other declared charset is refused, not mis-read."""
    return charset is None or charset in ("utf-8", "utf8")


def bearer_token(authorization: str | None) -> str | None:
    """The token of `Authorization: Bearer <token>` (scheme in any case), else None.

    A token is printable ASCII without spaces and at most MAX_TOKEN_CHARS long; anything
    else is no token at all."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > MAX_TOKEN_CHARS:
        return None
    if not (token.isascii() and token.isprintable()) or " " in token:
        return None
    return token


def asgi_headers(scope) -> dict[str, str]:
    """An ASGI request's headers by lower-case name; a header sent twice is joined with
    ", " as HTTP joins repeated fields (so a second Host cannot hide behind the first)."""
    headers: dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return headers


def _bare_host(value: str) -> str:
    """'example.org:9315' → 'example.org'; '[::1]:9315' → '::1'; a bare IPv6 stays."""
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else value
    return value.split(":", 1)[0] if value.count(":") == 1 else value


def host_allowed(value: str, allowed: Iterable[str]) -> bool:
    """`value` (host or host:port) is in the allow-list, as given or without its port."""
    names = {name.strip().lower() for name in allowed}
    value = value.strip().lower()
    return value in names or _bare_host(value) in names


def host_origin_problem(host: str | None, origin: str | None, allowed: Sequence[str]) -> str | None:
    """The one Host/Origin rule (AGENT_SALON_ALLOWED_HOSTS in the README): None when the
    request may go on, else the refusal. A page served from another name that resolves
    here (DNS rebinding) sends a foreign Host, a cross-site one a foreign Origin; a
    request without Origin (curl, a script, an MCP client) is fine, one without Host
    (HTTP/1.0) too."""
    if host and not host_allowed(host, allowed):
        return f"Host {shown(host, 100)} is not allowed; add it to AGENT_SALON_ALLOWED_HOSTS"
    if origin is None or origin == "":
        return None
    if origin == "null":
        return "Origin 'null' is not allowed (an opaque origin: a sandboxed page or a file)"
    from urllib.parse import urlsplit  # only a request with an Origin gets here

    try:
        netloc = urlsplit(origin).netloc
    except ValueError:
        netloc = ""
    if not netloc or not host_allowed(netloc, allowed):
        return (
            f"Origin {shown(origin, 100)} is not allowed; add its host to AGENT_SALON_ALLOWED_HOSTS"
        )
    return None


def event_id(value: str | None) -> int | None:
    """A Last-Event-ID: a short run of ASCII digits, else None (ignored)."""
    text = (value or "").strip()
    if 0 < len(text) <= MAX_EVENT_ID_DIGITS and text.isascii() and text.isdigit():
        return int(text)
    return None


# ---------------------------------------------------------------- output


def stored_uuid(value: object) -> uuid.UUID | None:
    """A stored UUID column's value where it is one; None for the text a row changed
    outside the bus may hold there instead (salon.sqlite reads it as text), so that it is
    never looked up."""
    return value if isinstance(value, uuid.UUID) else None


# What a terminal acts on: C0 but tab and newline, DEL, C1 (ESC starts every sequence, so
# with it escaped none is left); and lone surrogates, which no output can encode.
_TERMINAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
# A line of an entry's text that could pass for what is printed around entries: a header
# (`## <time> · room — TYPE → to  [sender]`), a flag (`!!! TAMPERED`), a `[salon]` line,
# an id or clipped line.
_ENTRY_FRAME = re.compile(r"\s*(#{1,6}\s*\d|\[salon\]|!!!|\(id |\[clipped:)")
FRAME_INDENT = "    "


def _escaped(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 256 else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """`text` with every character a terminal would act on written as its escape
    (`\\x1b`), so that no stored text can clear a screen or set a title."""
    if text.isascii() and text.isprintable():
        return text
    return _TERMINAL.sub(_escaped, text)


def entry_text(text: str) -> str:
    """An entry's text as the CLI, the hooks and `salon wait` print it: terminal_safe, and
    every line that looks like an entry's frame (a header, a flag) indented, so that one
    entry cannot pass for another sender's."""
    text = terminal_safe(text)
    return "\n".join(
        FRAME_INDENT + line if _ENTRY_FRAME.match(line) else line for line in text.split("\n")
    )


def safe_text(text: str) -> str:
    """`text` with each lone surrogate written as its escape (\\udxxx), so that it can be
    encoded as UTF-8. Inside a JSON string the escape reads back as the same character,
    so this also makes `json.dumps(..., ensure_ascii=False)` output printable."""
    if text.isascii():
        return text
    return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def loggable(value: object, limit: int = LOG_VALUE_CHARS) -> str:
    """A value from outside, fit for one log line: clipped to `limit` characters, then
    every character that is not printable (line breaks, DEL, other control characters,
    lone surrogates) escaped, so that no input can forge or break a line."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) > limit:
        text = f"{text[:limit]}…(+{len(text) - limit} characters)"
    if text.isascii() and text.isprintable():
        return text
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text
    )


def shown(value: object, limit: int = 64) -> str:
    """Untrusted input quoted in a message: clipped and escaped (see loggable); a value
    that is absent shows as None."""
    return "None" if value is None else f"'{loggable(value, limit)}'"
