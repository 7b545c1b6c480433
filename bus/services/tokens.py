"""Bearer tokens: issued per label, stored as their SHA-256, shown once."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import connection
from django.db.models import Count, Max
from django.utils import timezone

from bus import rules, signing, wire
from bus.models import Token


def issue_token(*, label: str) -> str:
    label = rules.validate_name(label, "label")
    token = "salon_" + secrets.token_urlsafe(32)
    Token.objects.create(label=label, token_hash=signing.hash_token(token))
    return token


def revoke_tokens(*, label: str) -> int:
    label = rules.validate_name(label, "label")
    return Token.objects.filter(label=label, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )


def list_tokens() -> list[dict]:
    rows = (
        Token.objects.filter(revoked_at__isnull=True)
        .values("label")
        .annotate(count=Count("id"), newest=Max("created_at"))
        .order_by("label")
    )
    return [
        {"label": r["label"], "tokens": r["count"], "newest": wire.iso(r["newest"])} for r in rows
    ]


# Every MCP request and every /notify asks this: one indexed statement, written out
# rather than compiled by the ORM on every call (token_active_by_label serves it).
_HAS_TOKEN_SQL = "SELECT 1 FROM {table} WHERE label = %s AND revoked_at IS NULL LIMIT 1"


def _label_has_token(label: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(_HAS_TOKEN_SQL.format(table=Token._meta.db_table), [label])
        return cursor.fetchone() is not None


def token_problem(*, label: str | None, token: str | None) -> str | None:
    """None when the caller may proceed; else what is wrong and how to fix it."""
    needed = settings.REQUIRE_TOKENS or (label and _label_has_token(label))
    if not needed:
        return None
    if not label:
        # Tokens belong to a label, so a caller without one can never present a valid one.
        return (
            "AGENT_SALON_REQUIRE_TOKENS=1: every caller needs a label and its bearer token; "
            "add ?label=<agent> to the URL and send 'Authorization: Bearer <token>' "
            "(issue one with `salon token issue <agent>`)"
        )
    if not token:
        return (
            f"label {label!r} needs a bearer token: send 'Authorization: Bearer <token>' "
            f"(issue one with `salon token issue {label or 'LABEL'}`)"
        )
    active = Token.objects.filter(revoked_at__isnull=True, label=label)
    if not active.filter(token_hash=signing.hash_token(token)).exists():
        return (
            f"the bearer token is not valid for label {label!r}; "
            f"issue a new one with `salon token issue {label or 'LABEL'}`"
        )
    return None
