"""The bearer tokens `salon install --http` provisions, kept in this user's own data
directory (`http-tokens.json`, mode 0600, in a directory of the user's), never in a
project file: `.mcp.json` is for committing, and a token is a password.

Each token is for one daemon address and one label: `[{"url": <base>, "label": <label>,
"token": <token>}, …]`. The HTTP server's headers helper (`salon hook mcp-headers`, run
by Claude Code at every connect with CLAUDE_CODE_MCP_SERVER_URL set to the entry's URL)
sends the one for its URL as `Authorization: Bearer …`. Standard library only: the helper
runs at every connect.
"""

from __future__ import annotations

import contextlib
import json
import os

FILE = "http-tokens.json"
URL_VARIABLE = "CLAUDE_CODE_MCP_SERVER_URL"


def path_in(data_dir: str) -> str:
    return os.path.join(data_dir, FILE)


def key(url: str) -> tuple[str, str] | None:
    """(the daemon's base URL, the label) of an MCP entry's URL (`…/mcp?label=…`)."""
    from urllib.parse import parse_qs, urlsplit

    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    labels = parse_qs(parts.query).get("label") or [""]
    path = parts.path.rstrip("/")
    if path.endswith("/mcp"):
        path = path[: -len("/mcp")]
    if not parts.scheme or not parts.netloc or not labels[0]:
        return None
    return f"{parts.scheme}://{parts.netloc}{path}", labels[0]


def read(path: str) -> list[dict]:
    """The file's entries; [] when it is missing, unreadable or not ours (a link, another
    user's, readable by others: a token there is no secret any more)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return []
    with os.fdopen(descriptor, "rb") as file:
        status = os.fstat(file.fileno())
        if status.st_uid != os.geteuid() or status.st_mode & 0o077:
            return []
        try:
            data = json.loads(file.read(1 << 20))
        except (ValueError, OSError):
            return []
    if not isinstance(data, list):
        return []
    return [e for e in data if isinstance(e, dict) and all(isinstance(e.get(k), str) for k in (
        "url", "label", "token"))]  # fmt: skip


def lookup(path: str, url: str | None) -> str | None:
    found = key(url) if url else None
    if found is None:
        return None
    for entry in read(path):
        if (entry["url"], entry["label"]) == found:
            return entry["token"]
    return None


def save(path: str, url: str, label: str, token: str) -> None:
    """Keep `token` for (url, label), replacing an older one; the file 0600, written to a
    new file beside it and renamed over it (never through a link)."""
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    kept = [e for e in read(path) if (e["url"], e["label"]) != (url, label)]
    kept.append({"url": url, "label": label, "token": token})
    draft = f"{path}.{os.getpid()}.salon-tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(draft)
    descriptor = os.open(draft, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            json.dump(kept, file, indent=1)
            file.write("\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(draft, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(draft)
        raise


def header(data_dir: str, environ=None) -> dict[str, str]:
    """The Authorization header for the MCP entry Claude Code connects (its URL in
    CLAUDE_CODE_MCP_SERVER_URL), {} when no token is kept for it."""
    environ = os.environ if environ is None else environ
    token = lookup(path_in(data_dir), environ.get(URL_VARIABLE))
    return {"Authorization": f"Bearer {token}"} if token else {}
