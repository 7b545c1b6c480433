"""What every staff page shares: read-only model pages, a paginator that never counts a
huge table, and how times, names and JSON are shown."""

from __future__ import annotations

import json
import time
from contextlib import contextmanager

from django.contrib import admin
from django.core.paginator import Paginator
from django.db import OperationalError, connections, transaction
from django.utils.functional import cached_property
from django.utils.html import format_html, format_html_join

from bus import rules, signing, strict

# The list stops counting here: "10,000+ entries" is all a person needs to know.
COUNT_CAP = 10_000
# ... and stops counting after this long: a filter no index serves (text in the content,
# a name in `to`) would otherwise scan the whole table to count its rare matches.
COUNT_BUDGET_SECONDS = 0.1


class BudgetExceeded(Exception):
    pass


@contextmanager
def time_budget(seconds: float, using: str = "default"):
    """Abort the queries run inside after `seconds` (SQLite: a progress handler;
    PostgreSQL: a local statement_timeout), raising BudgetExceeded. Reads only."""
    connection = connections[using]
    if connection.vendor == "sqlite":
        connection.ensure_connection()
        raw = connection.connection
        deadline = time.monotonic() + seconds
        raw.set_progress_handler(lambda: int(time.monotonic() > deadline), 1000)
        try:
            yield
        except OperationalError as exc:
            if "interrupted" in str(exc):
                raise BudgetExceeded from None
            raise
        finally:
            raw.set_progress_handler(None, 0)
    elif connection.vendor == "postgresql":
        try:
            with transaction.atomic(using=using):
                with connection.cursor() as cursor:
                    cursor.execute(f"SET LOCAL statement_timeout = {max(1, int(seconds * 1000))}")
                yield
                with connection.cursor() as cursor:
                    cursor.execute("SET LOCAL statement_timeout TO DEFAULT")
        except OperationalError as exc:
            if getattr(exc.__cause__, "sqlstate", None) == "57014":  # query_canceled
                raise BudgetExceeded from None
            raise
    else:
        yield


class CappedPaginator(Paginator):
    """Counts at most COUNT_CAP + 1 rows, for at most COUNT_BUDGET_SECONDS, so a table of
    millions costs a bounded query whatever the filter.

    `capped` tells the template to say "more than COUNT_CAP"; `counted` is False when the
    budget ran out (the page then says so, and offers COUNT_CAP worth of pages). Pages
    past the cap are not reachable by number; narrowing the filters reaches any entry.
    """

    counted = True

    @cached_property
    def count(self) -> int:
        query = self.object_list
        if not hasattr(query, "values"):
            return len(query)
        # ORDER BY is useless inside a count, and LIMIT keeps it bounded.
        bounded = query.order_by().values("pk")[: COUNT_CAP + 1]
        try:
            with time_budget(COUNT_BUDGET_SECONDS, using=query.db):
                return bounded.count()
        except BudgetExceeded:
            self.counted = False
            return COUNT_CAP + 1

    @property
    def capped(self) -> bool:
        return self.count > COUNT_CAP

    @property
    def cap_display(self) -> str:
        return f"{COUNT_CAP:,}"


class ReadOnlyAdmin(admin.ModelAdmin):
    """View permission only: the bus is written by bus.services, never by a form."""

    actions = None

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


def time_tag(ts) -> str:
    """A <time> the page's script shows in the browser's local time (UTC on hover)."""
    if ts is None:
        return "—"
    utc = signing.iso_ms(ts)
    return format_html(
        '<time datetime="{}" title="{} UTC">{} UTC</time>',
        utc,
        utc[:-1].replace("T", " "),
        utc[:-1].replace("T", " "),
    )


def shown(text: str) -> str:
    """Stored text as a page can carry it: a row changed outside the bus may hold a lone
    surrogate, which no UTF-8 response can (strict.safe_text escapes it)."""
    return strict.safe_text(str(text))


# The stats and the live view show every entry and seat: they need what the history of
# entries needs.
VIEW_PERMISSION = "bus.view_entry"

# Characters of a session id shown on the staff pages: as many as anywhere (bus.rules).
SHOWN_SESSION_CHARS = rules.SHOWN_SESSION_CHARS


def masked(session_id: str) -> str:
    """A session id as the staff pages show it: its first characters only. For a label
    without a token, the whole MCP session id is the session's only credential."""
    text = shown(session_id)
    return text if len(text) <= SHOWN_SESSION_CHARS else text[:SHOWN_SESSION_CHARS] + "…"


def _names(values) -> str:
    """A stored list of names; whatever a changed row holds there, only its names."""
    values = rules.names_in(values)
    if not values:
        return format_html('<span class="salon-quiet">{}</span>', "—")
    return format_html_join(
        ", ", '<code class="salon-name">{}</code>', ((shown(v),) for v in values)
    )


def _pre_json(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
    return format_html('<pre class="salon-json">{}</pre>', shown(text))


class TitledAdmin(ReadOnlyAdmin):
    """A list page titled with the plural name, not "Select … to view"; a detail page
    with no "History" button (nothing here is ever edited)."""

    change_form_template = "admin/salon_readonly_form.html"

    def changelist_view(self, request, extra_context=None):
        title = str(self.model._meta.verbose_name_plural).capitalize()
        return super().changelist_view(request, {"title": title, **(extra_context or {})})
