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
    problem = rules.case_variant_problem(label, _tokened_spellings(label))
    if problem:
        raise rules.RuleError(problem)
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


# Why a token is needed when nothing else asks for one.
UNKNOWN_CALLER = "the daemon cannot tell which local user is calling"

# Every MCP request and every /notify asks this: one indexed statement (on the folded
# label: token_active_by_folded_label), written out rather than compiled by the ORM on
# every call.
_TOKENED_SQL = (
    "SELECT DISTINCT label FROM {table} WHERE lower(label) = %s AND revoked_at IS NULL LIMIT 8"
)


def _tokened_spellings(label: str) -> list[str]:
    """The labels with an active token that differ from this one at most in case."""
    with connection.cursor() as cursor:
        cursor.execute(_TOKENED_SQL.format(table=Token._meta.db_table), [rules.fold_label(label)])
        return [row[0] for row in cursor.fetchall()]


def token_problem(*, label: str | None, token: str | None, required: bool = False) -> str | None:
    """None when the caller may proceed; else what is wrong and how to fix it.
    `required`: this caller needs a token whatever its label (the daemon could not tell
    which local user it is: salon.gate)."""
    tokened = _tokened_spellings(label) if label else []
    variant = rules.case_variant_problem(label, tokened) if label else None
    if variant:
        return variant
    needed = settings.REQUIRE_TOKENS or required or bool(tokened)
    if not needed:
        return None
    if not label:
        # Tokens belong to a label, so a caller without one can never present a valid one.
        why = "AGENT_SALON_REQUIRE_TOKENS=1" if settings.REQUIRE_TOKENS else UNKNOWN_CALLER
        return (
            f"{why}: every caller needs a label and its bearer token; "
            "add ?label=<agent> to the URL and send 'Authorization: Bearer <token>' "
            "(issue one with `salon token issue <agent>`)"
        )
    if not token:
        why = "" if tokened or settings.REQUIRE_TOKENS else f" ({UNKNOWN_CALLER})"
        return (
            f"label {label!r} needs a bearer token{why}: send 'Authorization: Bearer <token>' "
            f"(issue one with `salon token issue {label or 'LABEL'}`)"
        )
    active = Token.objects.filter(revoked_at__isnull=True, label=label)
    if not active.filter(token_hash=signing.hash_token(token)).exists():
        return (
            f"the bearer token is not valid for label {label!r}; "
            f"issue a new one with `salon token issue {label or 'LABEL'}`"
        )
    return None
