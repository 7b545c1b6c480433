"""Tool arguments checked against the very schema `tools/list` advertises for the tool.

The tool table's schemas are checked by `jsonschema` (Draft 2020-12, with one change:
an integer is a JSON integer, so 20.0 is refused); what is ours is the wording: each
problem names its argument and says what to send, every problem at once, in the order
a reader meets them (unknown keys, missing ones, then each argument in the schema's
order). A value of the wrong type, or outside its enum, is reported alone.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

_TYPE_WORDS = {"object": "an object", "string": "a string", "integer": "an integer",
               "number": "a number", "boolean": "true or false", "array": "an array",
               "null": "null"}  # fmt: skip


@functools.cache
def _strict_validator():
    # Imported here: `salon mcp` and the hooks load this module and may never check one.
    from jsonschema import Draft202012Validator, validators

    integers = Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _checker, v: isinstance(v, int) and not isinstance(v, bool)
    )
    return validators.extend(Draft202012Validator, type_checker=integers)


def _show(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def shown_value(value: object) -> str:
    """A value as a refusal quotes it: JSON, a string in quotes, cut at 60 characters."""
    shown = f"'{value}'" if isinstance(value, str) else json.dumps(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _plural(n: object, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _name(path) -> str:
    """`to[1]`, `meta.b`, or "" for the arguments themselves."""
    name = ""
    for step in path:
        name += f"[{step}]" if isinstance(step, int) else f".{step}" if name else str(step)
    return name


def _subject(path) -> str:
    return f"'{_name(path)}'" if path else "arguments"


def _types(e, s: str) -> str:
    names = [e.validator_value] if isinstance(e.validator_value, str) else e.validator_value
    return f"{s} must be " + " or ".join(_TYPE_WORDS.get(n, n) for n in names)


_SAYS = {
    "type": _types,
    "enum": lambda e, s: (
        f"{s} must be one of {', '.join(map(_show, e.validator_value))} "
        f"(got {shown_value(e.instance)})"
    ),
    "minLength": lambda e, s: (
        f"{s} must be at least {_plural(e.validator_value, 'character')} long"
    ),
    "maxLength": lambda e, s: (
        f"{s} must be at most {_plural(e.validator_value, 'character')} long "
        f"(got {len(e.instance)})"
    ),
    "minimum": lambda e, s: f"{s} must be at least {e.validator_value}",
    "maximum": lambda e, s: f"{s} must be at most {e.validator_value}",
    "minItems": lambda e, s: f"{s} must have at least {_plural(e.validator_value, 'item')}",
    "maxItems": lambda e, s: f"{s} must have at most {_plural(e.validator_value, 'item')}",
}


def _said(error) -> list[tuple[tuple, str]]:
    """(its place among the problems at its value, the message) for each problem one
    error stands for: unknown keys first, then missing ones, then the value's own."""
    path, value = list(error.absolute_path), error.instance
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    properties = list(schema.get("properties") or {})
    if error.validator == "additionalProperties" and error.validator_value is False:
        if properties:
            allowed = "allowed: " + ", ".join(properties)
        else:
            allowed = f"'{_name(path)}' takes no keys" if path else "this tool takes no arguments"
        unknown = [key for key in value if key not in properties]
        return [((0, i), f"unknown argument '{_name([*path, key])}' — {allowed}")
                for i, key in enumerate(unknown)]  # fmt: skip
    if error.validator == "required":
        missing = [key for key in error.validator_value if key not in value]
        return [((1, i), f"missing required argument '{_name([*path, key])}'")
                for i, key in enumerate(missing)]  # fmt: skip
    says = _SAYS.get(error.validator)
    return [
        ((-1, 0), says(error, _subject(path)) if says else f"{_subject(path)}: {error.message}")
    ]


def _place(path, schema: Mapping[str, Any], value: object) -> tuple:
    """Where a reader meets a value: a property in the schema's order after the unknown
    and missing keys; an item, or a key its additionalProperties checks, by index."""
    steps = []
    for step in path:
        properties = list(schema.get("properties") or {})
        if step in properties and isinstance(step, str):
            steps.append((2, properties.index(step)))
            schema = schema["properties"][step]
        else:
            steps.append((0, step if isinstance(step, int) else list(value).index(step)))
            schema = schema.get("items" if isinstance(step, int) else "additionalProperties")
        schema, value = schema if isinstance(schema, Mapping) else {}, value[step]
    return tuple(steps)


def validate_arguments(schema: Mapping[str, Any], args: object) -> list[str]:
    """Check tool arguments against the schema the tool table advertises.

    Returns one human message per problem, naming the argument; [] means valid.
    Absent arguments (None) count as {}: clients omit them for tools without any.
    """
    args = {} if args is None else args
    errors = list(_strict_validator()(schema).iter_errors(args))
    # A value of the wrong type (a type error wins), or outside its enum, is told alone.
    alone = {
        tuple(e.absolute_path): e
        for e in sorted(errors, key=lambda e: e.validator == "type")
        if e.validator in ("type", "enum")
    }
    said = [
        ((*_place(e.absolute_path, schema, args), where), message)
        for e in errors
        if all(tuple(e.absolute_path)[: len(p)] != p or e is a for p, a in alone.items())
        for where, message in _said(e)
    ]
    return [message for _, message in sorted(said, key=lambda item: item[0])]
