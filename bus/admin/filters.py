"""The staff history browser's filters (README, "The admin"), as one django-filter FilterSet.

Every filter is a plain GET parameter, so a filtered list is a URL that can be shared
and that pagination keeps:

=============  =====================================================================
room           the room's name
type           QUESTION, ANSWER, FACT or REQUEST (any case)
source         the sender: a seat (`web-app#3f9c1a20`) or an agent (`web-app`, every seat)
target         a name in `to`: the seat or agent named there; an agent name also matches
               the entries addressed to one of its seats
participant    either side: the sender, or a name in `to` (as `source` / `target`)
between        `a,b`: the conversation of a and b, entries from a to b and from b to a
exclude        a comma list of senders (seats or agents) to leave out
since, until   a time range, ISO 8601 (`2025-06-01T14:00Z`, `2025-06-01T16:00+02:00`,
               `2025-06-01`); no offset means the zone in `tz` (the page's script
               sets it to the browser's zone; UTC without it); a date alone covers
               the whole day
tz             an IANA time zone name (`Europe/Paris`), for the times above
q              search words in the content, the language of `salon search`: words (all
               must be there, any case), "a phrase", prefix*, -word; served by the
               full-text index; the list is then ranked as `salon search` ranks
               (bus.services.search.ranked): most relevant first, then newest first,
               each with a snippet of the text around the words found
=============  =====================================================================

`to` is a JSON list. On SQLite and PostgreSQL `to__icontains` compares against the JSON
text, so a name is matched with its quotes (`"web-app"`) and never as part of a longer
name; a seat of an agent is matched by the opening quote and the `#` (`"web-app#`).
Names are `[A-Za-z0-9._@#-]` only (bus.rules), so no quote or backslash needs escaping.
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from datetime import timezone as timezone_utc
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import django_filters
from django import forms
from django.db.models import Case, Q, Value, When
from django.utils.dateparse import parse_date, parse_datetime

from bus.models import Agent, Entry, Room, Seat
from bus.rules import TYPES, RuleError, closest_names, validate_name
from bus.services import search


def _names(value: str, what: str) -> list[str]:
    names = [n.strip() for n in value.split(",") if n.strip()]
    for name in names:
        try:
            validate_name(name, what)
        except RuleError as exc:
            raise forms.ValidationError(str(exc)) from None
    return names


class NameField(forms.CharField):
    """One seat or agent name (bus.rules)."""

    def clean(self, value):
        value = super().clean(value)
        if not value:
            return value
        names = _names(value, "name")
        if len(names) != 1:
            raise forms.ValidationError("give one name here (no commas)")
        return names[0]


class NameListField(forms.CharField):
    """A comma-separated list of seat or agent names."""

    def __init__(self, *args, count: int | None = None, **kwargs):
        self.count = count
        super().__init__(*args, **kwargs)

    def clean(self, value):
        value = super().clean(value)
        if not value:
            return []
        names = _names(value, "name")
        if self.count and len(names) != self.count:
            raise forms.ValidationError(
                f"give exactly {self.count} names separated by a comma, e.g. web-app,api"
            )
        return names


class MomentField(forms.CharField):
    """An ISO 8601 time or date: an aware datetime when it has an offset, else a naive
    one that EntryFilter places in the browser's time zone."""

    def __init__(self, *args, end_of_day: bool = False, **kwargs):
        self.end_of_day = end_of_day
        super().__init__(*args, **kwargs)

    def clean(self, value):
        value = super().clean(value)
        if not value:
            return None
        text = value.strip().replace(" ", "T", 1)
        if text.endswith(("z", "Z")):
            text = text[:-1] + "+00:00"
        try:
            # A date alone first: parse_datetime would read it as midnight.
            day = parse_date(text) if _is_date(text) else None
            moment = None if day else parse_datetime(text)
        except ValueError:
            moment = day = None
        if moment is None and day is None:
            raise forms.ValidationError(
                "not an ISO 8601 time: write e.g. 2025-06-01T14:00Z, "
                "2025-06-01T16:00+02:00 or 2025-06-01"
            )
        if day is not None:
            moment = datetime.combine(day, time.min)
            if self.end_of_day:
                moment += timedelta(days=1)
        return moment


class NameFilter(django_filters.CharFilter):
    field_class = NameField


class NameListFilter(django_filters.CharFilter):
    field_class = NameListField


class MomentFilter(django_filters.CharFilter):
    field_class = MomentField


def sent_by(name: str) -> Q:
    """Written by this seat, or by any seat of this agent.

    One column, never an OR of two: a seat name holds `#` and an agent name never does,
    and an agent's bare seat (`ci`) has that agent as its sender_agent too. Each side has
    its own index, (sender, ts) and (sender_agent, ts), which also yields newest first.
    """
    return Q(sender=name) if "#" in name else Q(sender_agent=name)


def addressed_to(name: str) -> Q:
    """`name` is in `to`, or (for an agent name) one of its seats is."""
    query = Q(to__icontains=f'"{name}"')
    if "#" not in name:
        query |= Q(to__icontains=f'"{name}#')
    return query


def conversation(a: str, b: str) -> Q:
    """From a to b, or from b to a.

    `to` is matched as JSON text, which no index serves. The redundant "`to` is not
    empty" term lets the database read only the addressed entries of the two senders
    (partial index entry_addressed_by_agent) instead of every entry they wrote.
    """
    addressed = ~Q(to=[])  # in each branch: SQLite picks an index per branch of an OR
    return (addressed & sent_by(a) & addressed_to(b)) | (addressed & sent_by(b) & addressed_to(a))


class EntryFilter(django_filters.FilterSet):
    room = django_filters.ModelChoiceFilter(
        field_name="room",
        to_field_name="name",
        queryset=Room.objects.order_by("name"),
        empty_label="every room",
        label="Room",
    )
    type = django_filters.ChoiceFilter(
        choices=[(t, t) for t in TYPES],
        empty_label="every type",
        label="Type",
        method="filter_type",
    )
    source = NameFilter(method="filter_source", label="From (seat or agent)")
    target = NameFilter(method="filter_target", label="To (seat or agent)")
    participant = NameFilter(method="filter_participant", label="Participant (either side)")
    between = NameListFilter(
        method="filter_between",
        label="Conversation a,b",
        count=2,
        help_text="entries from a to b and from b to a",
    )
    exclude = NameListFilter(method="filter_exclude", label="Leave out senders a,b,…")
    since = MomentFilter(
        method="filter_since",
        label="Since",
        help_text="ISO 8601; a time without an offset is in your browser's time zone",
    )
    until = MomentFilter(
        method="filter_until",
        label="Until",
        end_of_day=True,
        help_text="ISO 8601; a time without an offset is in your browser's time zone",
    )
    # The browser's time zone (IANA name), set by the page's script: typed times without
    # an offset mean the time the person sees on their clock.
    tz = django_filters.CharFilter(method="filter_zone", widget=forms.HiddenInput)
    q = django_filters.CharFilter(
        method="filter_text",
        label="Words in the content",
        help_text='words (all must be there), "a phrase", prefix*, -word',
    )

    class Meta:
        model = Entry
        fields: list[str] = []

    def __init__(self, data=None, *args, **kwargs):
        if data is not None and "type" in data and data.get("type"):
            # Types are case-insensitive on input, as on every other path.
            data = data.copy()
            data["type"] = data["type"].strip().upper()
        super().__init__(data, *args, **kwargs)

    # The text search, when there is one: bus.services.search.ranked's answer, for the
    # page's snippets and notes.
    search_answer: dict | None = None

    def filter_queryset(self, queryset):
        """Every filter, the text search last: it ranks what the others let through."""
        for name, value in self.form.cleaned_data.items():
            if name != "q":
                queryset = self.filters[name].filter(queryset, value)
        return self.filter_text(queryset, "q", self.form.cleaned_data.get("q") or "")

    def filter_text(self, queryset, name, value):
        """The entries the search finds, most relevant first, then newest first."""
        if not value.strip():
            return queryset
        self.search_answer = search.ranked(queryset, value)
        ids = [result["id"] for result in self.search_answer["results"]]
        if not ids:
            return queryset.none()
        place = Case(*(When(pk=pk, then=Value(i)) for i, pk in enumerate(ids)))
        return queryset.filter(pk__in=ids).order_by(place)

    def filter_type(self, queryset, name, value):
        return queryset.filter(type=value) if value else queryset

    def filter_source(self, queryset, name, value):
        return queryset.filter(sent_by(value)) if value else queryset

    def filter_target(self, queryset, name, value):
        return queryset.filter(addressed_to(value)) if value else queryset

    def filter_participant(self, queryset, name, value):
        return queryset.filter(sent_by(value) | addressed_to(value)) if value else queryset

    def filter_between(self, queryset, name, value):
        if not value:
            return queryset
        return queryset.filter(conversation(*value))

    def filter_exclude(self, queryset, name, value):
        for sender in value or ():
            queryset = queryset.exclude(sent_by(sender))
        return queryset

    def zone(self) -> ZoneInfo | timezone_utc:
        """The browser's zone, as the page's script named it (UTC when unknown)."""
        try:
            return ZoneInfo((self.data or {}).get("tz") or "UTC")
        except (ValueError, ZoneInfoNotFoundError):
            return UTC

    def _in_utc(self, value: datetime) -> datetime:
        if value.tzinfo is None:
            value = value.replace(tzinfo=self.zone())
        return value.astimezone(UTC)

    def filter_zone(self, queryset, name, value):
        return queryset  # read by zone(); filters nothing

    def filter_since(self, queryset, name, value):
        return queryset.filter(ts__gte=self._in_utc(value)) if value else queryset

    def filter_until(self, queryset, name, value):
        if not value:
            return queryset
        if _is_date(self.data.get("until", "")):
            return queryset.filter(ts__lt=self._in_utc(value))  # the next midnight
        return queryset.filter(ts__lte=self._in_utc(value))

    def unknown_names(self) -> list[str]:
        """For an empty result: each name filtered on that nobody on the bus was ever
        called, with the closest names there are (as the command line says it)."""
        if not self.is_bound or not self.is_valid():
            return []
        given = []
        for key in ("source", "target", "participant"):
            if self.form.cleaned_data.get(key):
                given.append(self.form.cleaned_data[key])
        for key in ("between", "exclude"):
            given += list(self.form.cleaned_data.get(key) or [])
        if not given:
            return []
        known = set(Seat.objects.values_list("name", flat=True))
        known |= set(Agent.objects.values_list("name", flat=True))
        notes = []
        for name in dict.fromkeys(given):
            if name in known:
                continue
            closest = closest_names(name, known, n=3)
            hint = f"; did you mean {', '.join(closest)}?" if closest else ""
            notes.append(f"nobody on the bus was ever called {name!r}{hint}")
        return notes

    @classmethod
    def unknown_parameter_notes(cls, names: list[str]) -> list[str]:
        """For each parameter that is no filter here: its name, and the closest filter."""
        import difflib  # here: only a mistyped URL needs it

        notes = []
        for name in names:
            guess = difflib.get_close_matches(name.lower(), list(cls.base_filters), n=1)
            hint = f"; did you mean {guess[0]}?" if guess else ""
            notes.append(f"unknown filter parameter {name[:64]!r}{hint}")
        return notes

    @property
    def active(self) -> dict[str, str]:
        """The filters in use, as given (for the page's summary)."""
        if not self.is_bound:
            return {}
        return {
            name: self.data.get(name)
            for name in self.filters
            if self.data.get(name) and name != "tz"
        }


def _is_date(text: str) -> bool:
    """`2025-06-01`: a calendar date with no time."""
    return len(text.strip()) == 10 and text.strip()[4:5] == "-"
