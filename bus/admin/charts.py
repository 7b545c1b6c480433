"""The stats page's charts, as geometry for inline SVG drawn on the server (no script, no
CDN: the page works offline); the template writes the elements."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

PALETTE = ("#417690", "#b4540a", "#6d3fb0", "#2e7d32", "#c2185b", "#55707d")
OTHER_COLOR = "#9aa5ab"
ALARM_COLOR = "#ba2121"
KIND_COLORS = {"rule": PALETTE[0], "quiet": PALETTE[2]}
MAX_SERIES = len(PALETTE)


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def nice_ceiling(value: float) -> int:
    """The smallest of 1, 2, 5 times 10^k at or above value (at least 1)."""
    if value <= 1:
        return 1
    power = 10 ** math.floor(math.log10(value))
    for factor in (1, 2, 5, 10):
        if factor * power >= value:
            return int(factor * power)
    return int(10 * power)  # pragma: no cover - the loop always returns


def _ticks(moments: Sequence[datetime], step: timedelta) -> list[tuple[int, str]]:
    """(bucket index, label) of the x-axis ticks, at most about nine: whole days as
    `Nov 30`; hours at a round interval as `14:00`, midnight as the date."""
    count = len(moments)
    if step >= timedelta(days=1):
        every = max(1, math.ceil(count / 9))
        return [(i, m.strftime("%b %d")) for i, m in enumerate(moments) if i % every == 0]
    if count > 48:  # several days of hours: one tick per day (or every few days)
        midnights = [i for i, m in enumerate(moments) if m.hour == 0]
        every = max(1, math.ceil(len(midnights) / 9))
        return [(i, moments[i].strftime("%b %d")) for i in midnights[::every]]
    interval = next(h for h in (1, 2, 3, 4, 6, 12, 24) if count / h <= 9)
    ticks = []
    for i, moment in enumerate(moments):
        if moment.hour % interval:
            continue
        midnight = moment.hour == 0
        label = moment.strftime("%b %d" if midnight else "%H:%M")
        if not ticks and not midnight:
            label = moment.strftime("%b %d %H:%M")
        ticks.append((i, label))
    return ticks


def _top_series(series: dict[str, list[int]]) -> list[tuple[str, str, list[int]]]:
    """At most MAX_SERIES named series (the biggest), the rest summed as "other rooms"."""
    ranked = sorted(series.items(), key=lambda item: (-sum(item[1]), item[0]))
    if len(ranked) <= MAX_SERIES:
        return [(name, PALETTE[i], values) for i, (name, values) in enumerate(ranked)]
    kept = ranked[: MAX_SERIES - 1]
    rest = [sum(column) for column in zip(*(v for _, v in ranked[MAX_SERIES - 1 :]), strict=True)]
    named = [(name, PALETTE[i], values) for i, (name, values) in enumerate(kept)]
    return [*named, (f"{len(ranked) - len(kept)} other rooms", OTHER_COLOR, rest)]


def stacked_bars(
    series: dict[str, list[int]],
    buckets: Sequence[datetime],
    step: timedelta,
    *,
    width: int = 1140,
    height: int = 170,
    color: str | None = None,
    unit: str = "",
) -> dict:
    """Geometry of a stacked bar chart: one bar per bucket, one segment per series."""
    left, right, top, bottom = 44, 8, 10, 24
    plot_w, plot_h = width - left - right, height - top - bottom
    named = _top_series(series)
    if color and len(named) == 1:
        named = [(named[0][0], color, named[0][2])]
    count = max(len(buckets), 1)
    totals = [sum(values[i] for _, _, values in named) for i in range(len(buckets))]
    ceiling = nice_ceiling(max(totals, default=0))
    slot = plot_w / count
    bar_w = max(slot * 0.78, 1.0)
    bars = []
    for i, moment in enumerate(buckets):
        y = top + plot_h
        x = left + i * slot + (slot - bar_w) / 2
        for name, fill, values in named:
            n = values[i]
            if not n:
                continue
            h = plot_h * n / ceiling
            y -= h
            when = moment.strftime("%Y-%m-%d %H:%M UTC")
            bars.append(
                {
                    "x": round(x, 2),
                    "y": round(y, 2),
                    "w": round(bar_w, 2),
                    "h": round(h, 2),
                    "fill": fill,
                    "title": f"{when} · {name}: {n}{unit}",
                    # The page's script writes `when` in the browser's zone.
                    "utc": _iso(moment),
                    "rest": f" · {name}: {n}{unit}",
                }
            )
    grid = []
    lines = min(ceiling, 5)  # ceilings are 1, 2, 5 or multiples of 5: whole-number steps
    for k in range(lines + 1):
        value = ceiling * k // lines
        y = top + plot_h - plot_h * k / lines
        text = f"{value:,}" if value < 10_000 else f"{value / 1000:g}k"
        grid.append({"y": round(y, 2), "label": text, "label_y": round(y + 4, 2)})
    ticks = [
        {"x": round(left + i * slot + slot / 2, 2), "label": label, "utc": _iso(buckets[i])}
        for i, label in _ticks(buckets, step)
    ]
    return {
        "width": width,
        "height": height,
        "left": left,
        "right": width - right,
        "top": top,
        "bottom": top + plot_h,
        "label_x": left - 6,
        "tick_y": height - 6,
        "bars": bars,
        "grid": grid,
        "ticks": ticks,
        "legend": [
            {"name": name, "color": fill, "total": sum(values)} for name, fill, values in named
        ],
        "total": sum(totals),
    }


def hbars(items: Iterable[tuple[str, int, str]], *, width: int = 540, row: int = 24) -> dict:
    """Geometry of horizontal bars: (label, value, color) per row."""
    items = list(items)
    label_w, value_w = 140, 70
    plot_w = width - label_w - value_w
    ceiling = max((value for _, value, _ in items), default=0) or 1
    rows = []
    bar_h = row - 8
    for i, (label, value, fill) in enumerate(items):
        y = 6 + i * row
        w = max(plot_w * value / ceiling, 2 if value else 0)
        rows.append(
            {
                "label": label,
                "value": f"{value:,}",
                "y": y,
                "text_y": round(y + bar_h / 2 + 4, 2),
                "w": round(w, 2),
                "value_x": round(label_w + w + 6, 2),
                "fill": fill,
            }
        )
    return {
        "width": width,
        "height": 12 + row * len(items),
        "bar_x": label_w,
        "label_x": label_w - 8,
        "bar_h": bar_h,
        "rows": rows,
    }
