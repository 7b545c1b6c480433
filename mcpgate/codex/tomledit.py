"""Small, careful edits of a TOML file: whole tables of ours set or removed, every other
byte kept.

Codex CLI's configuration is TOML (`config.toml`). agent-salon owns a few tables in it —
`[mcp_servers.salon]` in the project's, `[projects."<root>"]` and `[hooks.state."<key>"]`
in the user's — and edits nothing else. A table is its header line and the lines up to
the next header; ours carry the marker comment `# agent-salon` on their header, which
is how uninstall tells them from a table the user wrote. A table set again is rewritten
where it stands (a re-run changes nothing); a new one is appended.

Every edit is checked: the new text, read with tomllib, must hold exactly the old
content with only our tables changed. A file that defines one of them another way (an
inline table, dotted keys) fails that check, and is refused and left untouched
(TomlEditError) rather than half-edited.
"""

from __future__ import annotations

import copy
import json
import re
import tomllib

MARKER = "# agent-salon"
_BARE = re.compile(r"^[A-Za-z0-9_-]+$")
_HEADER = re.compile(
    r"^\s*\[(?!\[)(?P<key>(?:[^\]\"'#]|\"(?:[^\"\\]|\\.)*\"|'[^']*')+)\]\s*(?P<rest>#.*)?$"
)
_ARRAY_HEADER = re.compile(r"^\s*\[\[")


class TomlEditError(ValueError):
    """The file is not TOML, or not in a shape these edits can change safely."""


def key(part: str) -> str:
    return part if _BARE.match(part) else json.dumps(part, ensure_ascii=False)


def value(item: object) -> str:
    """A TOML value: strings as basic strings (JSON's escapes are TOML's), numbers,
    booleans, arrays and inline tables of them."""
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int | float):
        return repr(item)
    if isinstance(item, str):
        return json.dumps(item, ensure_ascii=False)
    if isinstance(item, list | tuple):
        return "[" + ", ".join(value(v) for v in item) + "]"
    if isinstance(item, dict):
        if not item:
            return "{}"
        return "{ " + ", ".join(f"{key(k)} = {value(v)}" for k, v in item.items()) + " }"
    raise TypeError(f"no TOML form for {type(item).__name__}")


def table(path: tuple[str, ...], values: dict) -> str:
    """A table of ours: its marked header, then one line per value."""
    lines = [f"[{'.'.join(key(p) for p in path)}]  {MARKER}"]
    lines += [f"{key(k)} = {value(v)}" for k, v in values.items()]
    return "\n".join(lines) + "\n"


def header_path(line: str) -> tuple[tuple[str, ...], bool] | None:
    """(the key path, marked as ours) of a `[table]` header line, else None."""
    match = _HEADER.match(line)
    if match is None:
        return None
    try:
        parsed = tomllib.loads(f"[{match.group('key')}]\n")
    except tomllib.TOMLDecodeError:
        return None
    path: list[str] = []
    while isinstance(parsed, dict) and len(parsed) == 1:
        ((name, parsed),) = parsed.items()
        path.append(name)
    rest = (match.group("rest") or "").strip()
    return tuple(path), rest.startswith(MARKER)


def segments(text: str) -> list[tuple[tuple[str, ...] | None, bool, list[str]]]:
    """The file as (table path or None for what precedes the first header / an array of
    tables, marked, lines)."""
    parts: list[tuple[tuple[str, ...] | None, bool, list[str]]] = [(None, False, [])]
    for line in text.splitlines(keepends=True):
        found = header_path(line.rstrip("\r\n"))
        if found is not None:
            parts.append((found[0], found[1], [line]))
        elif _ARRAY_HEADER.match(line):
            parts.append((None, False, [line]))
        else:
            parts[-1][2].append(line)
    return parts


def loads(text: str, label: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TomlEditError(f"{label} is not valid TOML ({exc})") from None
    except RecursionError:
        raise TomlEditError(f"{label} is nested too deeply to be read") from None


def _within(path: tuple[str, ...], owned: tuple[str, ...]) -> bool:
    return path[: len(owned)] == owned


def edit(text: str, label: str, *, set_tables=(), remove=()) -> str:
    """`text` with each (path, values) of `set_tables` written as a table of ours (where
    a table of that path stands, else at the end) and each path of `remove` taken out
    (with its sub-tables). Refused (TomlEditError) if the result would hold anything but
    that change."""
    before = loads(text, label)
    wanted = {tuple(path): values for path, values in set_tables}
    gone = [tuple(path) for path in remove]
    result = _rewritten(text, wanted, gone)
    expected = copy.deepcopy(before)
    for path in gone:
        _drop(expected, path)
    for path, values in wanted.items():
        _drop(expected, path)
        _put(expected, path, values)
    try:
        after = tomllib.loads(result)
    except tomllib.TOMLDecodeError:
        after = None
    if after is None or _pruned(after) != _pruned(expected):
        shown = ", ".join(".".join(p) for p in [*wanted, *gone])
        raise TomlEditError(
            f"{label} defines {shown} in a way salon does not edit (an inline table or "
            "dotted keys, or a table split in parts)"
        )
    return result


def _rewritten(text: str, wanted: dict, gone: list) -> str:
    out: list[str] = []
    placed: set[tuple[str, ...]] = set()
    for path, _marked, lines in segments(text):
        owner = None if path is None else next((p for p in wanted if _within(path, p)), None)
        if path is None or (owner is None and not any(_within(path, p) for p in gone)):
            out.append("".join(lines))
        elif owner is not None and owner not in placed:
            placed.add(owner)
            out.append(table(owner, wanted[owner]) + _blank_tail(lines))
        elif owner is None and out and out[-1].endswith("\n\n"):
            out[-1] = out[-1][:-1]  # the blank line that set the table apart
    result = "".join(out)
    for path in wanted:
        if path not in placed:
            if result and not result.endswith("\n"):
                result += "\n"
            if result.strip():
                result += "\n"
            result += table(path, wanted[path])
    return result


def _blank_tail(lines: list[str]) -> str:
    """The blank lines that ended a replaced table (kept: they separate it from the next)."""
    tail = []
    for line in reversed(lines[1:]):
        if line.strip():
            break
        tail.append(line)
    return "".join(tail)


def _drop(data: dict, path: tuple[str, ...]) -> None:
    here = data
    for part in path[:-1]:
        here = here.get(part)
        if not isinstance(here, dict):
            return
    here.pop(path[-1], None)


def _put(data: dict, path: tuple[str, ...], values: dict) -> None:
    here = data
    for part in path[:-1]:
        if not isinstance(here.get(part), dict):
            here[part] = {}  # not a table: the edit cannot hold it, and is refused
        here = here[part]
    here[path[-1]] = copy.deepcopy(values)


def _pruned(data: object) -> object:
    """Without empty tables (a table whose last table of ours was removed leaves none)."""
    if isinstance(data, dict):
        kept = {k: _pruned(v) for k, v in data.items()}
        return {k: v for k, v in kept.items() if v != {}}
    if isinstance(data, list):
        return [_pruned(v) for v in data]
    return data


def marked_tables(text: str) -> list[tuple[str, ...]]:
    """The paths of the tables marked as ours."""
    return [path for path, marked, _ in segments(text) if path is not None and marked]
