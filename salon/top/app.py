"""`salon top`'s screen, on Textual: three live panes and a pager's keys.

* rooms: entries, seats, live seats; moving in it opens that room's seats;
* seats of the opened room: live / `?` / gone, reading or behind, focus, quiet, claims;
* the flow: time, room, type, sender, addressees, who it wakes, the first line.

The store is watched the way `salon watch` watches it (bus.bell.Listener: PRAGMA
data_version on SQLite, whichever process committed — a running server or a command
working alone —, LISTEN on PostgreSQL), so it shows the same with or without a server.
The flow reads the entries after its positions (bus.live.after) at each ring; the rooms
and seats are read again after a ring (at most every PANES_GAP_SECONDS) and every
PANES_SECONDS, since check-ins, focus, quiet and passing time ring nothing.

Only salon.top.run imports this module: Textual is loaded by `salon top` alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from functools import partial

from asgiref.sync import sync_to_async
from django.db import DatabaseError, connection
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Input, Static

from bus import bell, live
from bus.management.base import one_line
from salon.top import view

PANES_SECONDS = 2.0
PANES_GAP_SECONDS = 0.5
INTERRUPTED = 130  # Ctrl-C's exit status, as every other command's


async def in_thread(function, *args, **kwargs):
    """The ORM from the event loop: on the one thread that holds this process's connection."""
    return await sync_to_async(function, thread_sensitive=True)(*args, **kwargs)


class Pane(DataTable):
    """A table you page through: j/k, PgUp/PgDn (DataTable's own), Home/End by row."""

    BINDINGS = [
        Binding("j", "cursor_down", "down", show=False),
        Binding("k", "cursor_up", "up", show=False),
        Binding("home", "first", "first", show=False),
        Binding("end", "last", "last", show=False),
    ]

    def __init__(self, columns: tuple[str, ...], **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self.headings = columns
        self.drawn: list[tuple] = []

    def on_mount(self) -> None:
        self.add_columns(*self.headings)

    # The operator's moves, told apart from the cursor put back as the pane is drawn
    # again: only those open another room.
    moved = False

    def action_cursor_down(self) -> None:
        self.moved = True
        super().action_cursor_down()

    def action_cursor_up(self) -> None:
        self.moved = True
        super().action_cursor_up()

    def action_page_down(self) -> None:
        self.moved = True
        super().action_page_down()

    def action_page_up(self) -> None:
        self.moved = True
        super().action_page_up()

    async def _on_click(self, event) -> None:
        self.moved = True
        await super()._on_click(event)

    def action_first(self) -> None:
        self.moved = True
        if self.row_count:
            self.move_cursor(row=0)

    def action_last(self) -> None:
        self.moved = True
        if self.row_count:
            self.move_cursor(row=self.row_count - 1)

    def key_at_cursor(self) -> str | None:
        if not self.row_count:
            return None
        return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value

    def draw(self, rows: list[tuple[str, tuple[str, ...]]], keep: str | None) -> None:
        """Rows (key, cells) drawn again if they changed; the cursor on `keep` if given."""
        if rows == self.drawn:
            return
        at = self.cursor_row
        self.clear()
        for key, cells in rows:
            self.add_row(*(Text(c) for c in cells), key=key)
        self.drawn = rows
        keys = [key for key, _ in rows]
        if keep in keys:
            self.move_cursor(row=keys.index(keep), animate=False)
        elif rows:
            self.move_cursor(row=min(at, len(rows) - 1), animate=False)


class Flow(Pane):
    """The flow: the loaded entries that pass the filter and the search, two lines each
    (who to whom and whom it wakes; the first line of the text). The cursor on the last
    row follows new entries (End puts it there); anywhere else it stays."""

    BINDINGS = [Binding("enter", "open", "open", show=False)]

    def __init__(self, **kwargs) -> None:
        super().__init__(("entry",), **kwargs)
        self.show_header = False

    def following(self) -> bool:
        return self.row_count == 0 or self.cursor_row >= self.row_count - 1

    def append(self, entries: list[dict]) -> None:
        follow = self.following()
        for entry in entries:
            self.add_row(drawn(view.flow_row(entry)), key=entry["id"], height=2)
            self.drawn.append((entry["id"], ()))
        if follow and self.row_count:
            self.move_cursor(row=self.row_count - 1, animate=False)

    def action_open(self) -> None:
        key = self.key_at_cursor()
        if key is not None:
            self.app.open_entry(key)


TYPE_STYLE = {"QUESTION": "bold yellow", "REQUEST": "bold magenta", "ANSWER": "bold green"}


def drawn(row: view.FlowRow) -> Text:
    """An entry's two lines, styled; every part is already terminal-safe (view.cell)."""
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(row.time, "dim")
    text.append(f" {row.room} ", "cyan")
    text.append(row.type, TYPE_STYLE.get(row.type, "bold"))
    text.append(f" {row.sender}")
    text.append(f" → {row.to}", "dim" if row.to == "*" else "")
    if row.wakes:
        text.append(f"  wakes {row.wakes}", "green")
    text.append("\n  ")
    if row.tampered:
        text.append("TAMPERED ", "bold red")
    text.append(row.text)
    return text


class TextScreen(ModalScreen):
    """A text over the panes (an entry in full, the help): Esc, q or Enter closes it."""

    BINDINGS = [
        Binding("escape", "close", "close"),
        Binding("q", "close", "close", show=False),
        Binding("enter", "close", "close", show=False),
        Binding("question_mark", "close", "close", show=False),
        Binding("j", "scroll('down')", show=False),
        Binding("k", "scroll('up')", show=False),
    ]

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text = title
        self.text = text
        self.closing = False

    def compose(self) -> ComposeResult:
        box = VerticalScroll(Static(Text(self.text), id="text"), id="box")
        box.border_title = self.title_text
        box.border_subtitle = "Esc closes"
        yield box

    def action_close(self) -> None:
        if not self.closing:  # a key pressed twice quickly closes it once
            self.closing = True
            self.dismiss()

    def action_scroll(self, way: str) -> None:
        box = self.query_one("#box", VerticalScroll)
        box.scroll_down() if way == "down" else box.scroll_up()


class SearchBox(ModalScreen[str | None]):
    """`/`: a line at the bottom; Enter searches the flow, Esc clears the search."""

    BINDINGS = [Binding("escape", "clear", "clear")]

    def __init__(self, query: str) -> None:
        super().__init__()
        self.query_text = query
        self.closing = False

    def compose(self) -> ComposeResult:
        yield Input(value=self.query_text, placeholder="search the flow", id="search")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.close(event.value)

    def action_clear(self) -> None:
        self.close("")

    def close(self, query: str) -> None:
        if not self.closing:  # Enter pressed twice quickly searches once
            self.closing = True
            self.dismiss(query)


class Top(App):
    """The operator's terminal view. `room`: the room opened first (else the busiest)."""

    TITLE = "salon top"
    CSS = """
    Screen { layout: vertical; }
    #upper { height: 40%; min-height: 8; max-height: 24; }
    #rooms { width: 30; height: 100%; }
    #seats { width: 1fr; height: 100%; }
    #flow { height: 1fr; }
    Pane { border: round $panel; scrollbar-size: 1 1; }
    Pane:focus { border: round $accent; }
    TextScreen { align: center middle; }
    TextScreen #box { width: 90%; height: 90%; border: round $accent; background: $surface; }
    SearchBox { align: center bottom; }
    SearchBox Input { dock: bottom; width: 100%; }
    """
    BINDINGS = [
        Binding("q", "quit_top", "quit"),
        Binding("ctrl+c", "interrupt", "quit", show=False, priority=True),
        Binding("tab", "app.focus_next", "pane", show=True),
        Binding("shift+tab", "app.focus_previous", "pane", show=False),
        Binding("slash", "search", "search"),
        Binding("f", "filter", "filter"),
        Binding("question_mark", "help", "help"),
    ]
    ENABLE_COMMAND_PALETTE = False

    def __init__(self, room: str | None = None) -> None:
        super().__init__()
        self.room = room
        self.entries: list[dict] = []  # the loaded flow, oldest first
        self.filter = "all"
        self.query_text = ""
        self.query_found: frozenset[str] = frozenset()  # the store's search (view.found_ids)
        self.rung = asyncio.Event()
        self.listener: bell.Listener | None = None
        self.panes_at: float | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(id="upper"):
            yield Pane(view.ROOM_COLUMNS, id="rooms")
            yield Pane(view.SEAT_COLUMNS, id="seats")
        yield Flow(id="flow")
        yield Footer()

    @property
    def flow(self) -> Flow:
        return self.query_one("#flow", Flow)

    async def on_mount(self) -> None:
        self.query_one("#rooms", Pane).border_title = "rooms"
        self.query_one("#seats", Pane).border_title = "seats"
        self.title_flow()
        self.flow.focus()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):  # from outside: `kill`
            loop.add_signal_handler(signum, self.action_interrupt)
        # Listen first, then read where the rooms are: nothing falls in between.
        self.listener = bell.Listener(None, stored=self.rung.set)
        self.listener.start()
        self.run_worker(self.watch(), name="watch", exit_on_error=True)

    async def on_unmount(self) -> None:
        with contextlib.suppress(RuntimeError, ValueError):
            for signum in (signal.SIGINT, signal.SIGTERM):
                asyncio.get_running_loop().remove_signal_handler(signum)
        if self.listener is not None:
            await self.listener.stop()

    # -- reading the store ----------------------------------------------------------

    async def watch(self) -> None:
        clock = asyncio.get_running_loop().time
        at: live.Positions | None = None
        while True:
            self.rung.clear()  # a ring from here on makes the next wait end at once
            try:
                if at is None:  # the first look: where the rooms are, and the recent past
                    at = await in_thread(live.positions)
                    first = await in_thread(live.recent, at, limit=view.BACKLOG)
                    self.add_entries([item.data for item in first])
                items = await in_thread(live.after, at)
                for item in items:
                    at[item.room_id] = item.seq
                self.add_entries([item.data for item in items])
                if items:
                    continue  # a room may have had more than one batch waiting
                if self.panes_at is None or clock() - self.panes_at >= PANES_GAP_SECONDS:
                    await self.draw_panes()
            except DatabaseError as exc:  # a restarted database: reconnect, look again
                await self.database_error(exc)
                continue
            except NoMatches:  # the app is closing and its panes are gone: nothing to draw
                return
            await bell.rung_within(self.rung, PANES_SECONDS)

    async def database_error(self, exc: DatabaseError) -> None:
        self.notify(f"database error ({one_line(exc)[:200]}); retrying", severity="error")
        await in_thread(connection.close)
        await asyncio.sleep(1)

    async def draw_panes(self) -> None:
        shot = await in_thread(view.snapshot, self.room)
        self.panes_at = asyncio.get_running_loop().time()
        self.show_panes(shot)

    async def open_room(self) -> None:
        try:
            await self.draw_panes()
        except DatabaseError as exc:  # the watch draws them again once it reconnects
            await self.database_error(exc)

    def show_panes(self, shot: view.Snapshot) -> None:
        panes = shot.panes
        if self.room is None or self.room != panes.room:
            self.room = panes.room
        rooms = self.query_one("#rooms", Pane)
        rooms.draw([(r.name, view.room_cells(r)) for r in panes.rooms], keep=self.room)
        seats = self.query_one("#seats", Pane)
        seats.draw(
            [
                (str(s.seat_id), view.seat_cells(s, shot.claims.get(s.seat_id, [])))
                for s in panes.seats
            ],
            keep=None,
        )
        more = f" (+{panes.seats_left_out} more)" if panes.seats_left_out else ""
        seats.border_title = f"seats of {view.cell(panes.room or '-', 40)}{more}"

    def add_entries(self, entries: list[dict]) -> None:
        if not entries:
            return
        self.entries.extend(entries)
        dropped = len(self.entries) - view.KEEP
        if dropped > 0:
            del self.entries[:dropped]
            self.draw_flow()
        else:
            self.flow.append(self.shown(entries))
        self.title_flow()

    def shown(self, entries: list[dict]) -> list[dict]:
        passing = [e for e in entries if view.passes(e, self.filter)]
        if not self.query_text:
            return passing
        return view.search(passing, self.query_text, self.query_found)

    def draw_flow(self) -> None:
        """The flow drawn again (a new filter or search), following the newest entry."""
        flow = self.flow
        flow.clear()
        flow.drawn = []
        flow.append(self.shown(self.entries))
        self.title_flow()

    def title_flow(self) -> None:
        flow = self.flow
        parts = [f"flow: {self.filter}"]
        if self.query_text:
            parts.append(f"search {view.cell(self.query_text, 40)!r}")
        parts.append(f"{flow.row_count} of {len(self.entries)}")
        flow.border_title = " · ".join(parts)
        flow.border_subtitle = "following" if flow.following() else "End follows"

    # -- keys -------------------------------------------------------------------------

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        pane = event.data_table
        if pane.id == "rooms" and isinstance(pane, Pane) and pane.moved:
            pane.moved = False  # the room the operator moved to opens
            room = pane.key_at_cursor()
            if room is not None and room != self.room:
                self.room = room
                self.run_worker(self.open_room, group="panes", exclusive=True)
        elif event.data_table.id == "flow":
            self.flow.border_subtitle = "following" if self.flow.following() else "End follows"

    def action_quit_top(self) -> None:
        self.exit(return_code=0)

    def action_interrupt(self) -> None:
        self.exit(return_code=INTERRUPTED)

    def action_filter(self) -> None:
        self.filter = view.next_filter(self.filter)
        self.draw_flow()

    def action_search(self) -> None:
        def searched(query: str | None) -> None:
            if query is not None:
                self.query_text, self.query_found = query.strip(), frozenset()
                self.draw_flow()
                if self.query_text:
                    self.run_worker(self.search_store, group="search", exclusive=True)

        self.push_screen(SearchBox(self.query_text), searched)

    async def search_store(self) -> None:
        """The store's search for the query, then the flow drawn again with what it found."""
        query = self.query_text
        found = await in_thread(view.found_ids, query)
        if query == self.query_text:  # not replaced meanwhile
            self.query_found = found
            self.draw_flow()

    def action_help(self) -> None:
        self.push_screen(TextScreen("help", view.HELP))

    def open_entry(self, entry_id: str) -> None:
        shown = next((e for e in self.entries if e["id"] == entry_id), None)
        if shown is not None:
            self.run_worker(partial(self._open, shown), group="open", exclusive=True)

    async def _open(self, shown: dict) -> None:
        try:
            text = await in_thread(view.in_full, shown)
        except DatabaseError as exc:
            await self.database_error(exc)
            return
        title = f"{view.cell(shown['type'])} in {view.cell(shown['room'])} #{shown['seq']}"
        self.push_screen(TextScreen(title, text))
