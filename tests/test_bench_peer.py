"""The comparison servers of bench/: the peer that stores keeps what it pushes."""

from __future__ import annotations

import contextlib
import sqlite3

from bench import side_by_side as s


async def test_the_durable_peer_keeps_every_message_it_pushes_in_a_wal_file(tmp_path):
    store = tmp_path / "peer.sqlite3"
    arrivals = s.Arrivals()
    with s.peer_server(store=store) as peer:
        async with contextlib.AsyncExitStack() as stack:
            side = await s.open_side(stack, peer, arrivals, 1, 1, "t")
            for text in ("first", "second"):
                arrivals.expect(text)
                assert await s.send(side.senders[0], text, ["t-r0"], "FACT") == ""
                assert len(await arrivals.wait(text, timeout=30)) == 1
    with contextlib.closing(sqlite3.connect(store)) as db:
        rows = db.execute("SELECT sender, type, recipients, content FROM message ORDER BY id")
        assert rows.fetchall() == [
            ("t-s0", "FACT", "t-r0", "first"),
            ("t-s0", "FACT", "t-r0", "second"),
        ]
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
