"""Before and after in one run: two agent-salon trees and the peer, rounds alternating.

Back-to-back runs of `bench.side_by_side` move by a third from one run to the next on a
shared machine (the peer's own figures too), more than most changes save. Here the two
trees run at once, each a `salon serve` on a fresh SQLite store with 100 receiving and 8
sending SDK sessions, beside the peer (bench/peer_server.py), and every round is taken on
A, then B, then the peer: whatever loads the machine weighs on the three alike.

    git archive BEFORE | tar -x -C /tmp/before        # a plain export of the before
    python -m bench.ab /tmp/before . --rounds 6
    python -m bench.ab . . --settings-b bench.settings_sync_normal   # what the fsync costs
    python -m bench.ab . --durable-peer      # one tree, the peer, and the peer that stores

A tree is any directory holding this repository's code (a worktree, an export): its
daemon runs with PYTHONPATH set to it, this process's harness drives every server. With
one tree and --durable-peer, the servers are that tree, the peer and the peer that keeps
each message in SQLite before its push (bench/peer_server.py --store). Per round and
server: 100 isolated sends (5 ms apart), 200 sends with 1 in flight, 8 x 60 with 8 in
flight, and (agent-salon only) /notify with 8 posters for --notify seconds. Prints the
daemon CPU per send (every round's value too), the ratio to the peer and the push latency.
Measured on 2 cores at load 5-7, the same tree as both sides came out 1-4 % apart on the
means of 4 rounds, while single rounds ranged over ±20 %: only a change worth more than
about 5 % of a send shows.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import statistics
import tempfile
from pathlib import Path

from bench import side_by_side as s
from bench.common import loadavg, own_environment, raise_nofile

DURABLE = "durable-peer"  # the peer keeping each message in SQLite before its push

# (name, senders, sends per sender, gap between a push and the next send)
KINDS = (
    ("isolated", 1, 100, s.LATENCY_GAP),
    ("1 in flight", 1, 200, 0),
    ("8 in flight", 8, 60, 0),
)


async def compare(
    trees: list[tuple[str, Path, str]], rounds: int, notify: float, durable_peer: bool = False
) -> None:
    arrivals = s.Arrivals()
    with contextlib.ExitStack() as servers:
        named = _servers(servers, trees, durable_peer)
        async with contextlib.AsyncExitStack() as stack:
            sides = []
            for label, server in named:
                side = await s.open_side(stack, server, arrivals, 100, 8, label)
                await s.warm_up(side, arrivals)
                sides.append((label, side))
            runs, loads = await _rounds(sides, arrivals, rounds, notify)
    print(f"load average {loads[0]} at the start, {loads[-1]} at the end")
    for label, tree, settings in trees:
        print(f"{label}: {tree}" + (f" ({settings})" if settings else ""))
    labels = [label for label, _ in sides]
    for kind, _, _, _ in KINDS:
        _report_kind(kind, labels, runs, durable_peer)
    for label in labels:
        if runs[label, "notify"]:
            _report_notify(label, runs[label, "notify"])


def _servers(servers: contextlib.ExitStack, trees, durable_peer: bool) -> list[tuple[str, str]]:
    """Each tree's daemon, the plain peer and (asked for) the durable peer, started."""
    named = []
    for label, tree, settings in trees:
        extra = {"DJANGO_SETTINGS_MODULE": settings} if settings else {}
        named.append((label, servers.enter_context(s.salon_server(PYTHONPATH=str(tree), **extra))))
    named.append(("peer", servers.enter_context(s.peer_server())))
    if durable_peer:
        where = Path(servers.enter_context(tempfile.TemporaryDirectory()))
        named.append((DURABLE, servers.enter_context(s.peer_server(store=where / "peer.sqlite3"))))
    return named


async def _rounds(sides, arrivals, rounds: int, notify: float):
    """Every kind on every side, round after round, the sides alternating."""
    runs: dict[tuple[str, str], list] = collections.defaultdict(list)
    loads = [loadavg()]
    for r in range(rounds):
        for kind, senders, sends, gap in KINDS:
            for label, side in sides:
                tag = f"{label} {kind} {r}"
                runs[label, kind].append(
                    await s.closed_loop(side, arrivals, senders, sends, gap, tag)
                )
        for label, side in sides:
            if label not in ("peer", DURABLE) and notify:
                runs[label, "notify"].append(await s.notify_run(side, arrivals, 8, notify))
        loads.append(loadavg())
        s.say(f"  round {r + 1}/{rounds} done (load {loads[-1]})")
    return runs, loads


def _report_kind(kind: str, labels: list[str], runs, durable_peer: bool) -> None:
    peer = s.Combined(runs["peer", kind])
    durable = s.Combined(runs[DURABLE, kind]) if durable_peer else None
    print(f"{kind}: daemon CPU per send and push; push p50 / p99")
    for label in labels:
        combined = s.Combined(runs[label, kind])
        rounds_ms = " ".join(f"{run.server_cpu / run.sent * 1000:.2f}" for run in combined.runs)
        ratios = f"{combined.cpu_ms() / peer.cpu_ms():.2f}x the peer"
        if durable is not None:
            ratios += f", {combined.cpu_ms() / durable.cpu_ms():.2f}x {DURABLE}"
        print(
            f"  {label}: {combined.cpu_ms():.3f} ms ({ratios}; rounds {rounds_ms}); "
            f"{combined.p(50):.2f} / {combined.p(99):.2f} ms"
        )


def _report_notify(label: str, notify_runs: list[dict]) -> None:
    cpu = [run["cpu_ms"] for run in notify_runs]
    entries = sum(run["sent"] for run in notify_runs)
    rounds_ms = " ".join(f"{c:.2f}" for c in cpu)
    print(
        f"/notify, 8 posters, {label}: {statistics.mean(cpu):.3f} ms per entry "
        f"(rounds {rounds_ms}; {entries} entries)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path, help="the first tree (the before)")
    parser.add_argument("b", type=Path, nargs="?", help="the second tree (the after)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--notify", type=float, default=5.0, help="seconds of /notify a round")
    parser.add_argument("--settings-a", default="", help="DJANGO_SETTINGS_MODULE for A")
    parser.add_argument("--settings-b", default="", help="DJANGO_SETTINGS_MODULE for B")
    parser.add_argument(
        "--durable-peer",
        action="store_true",
        help="also the peer keeping each message in SQLite (synchronous=FULL) before its push",
    )
    args = parser.parse_args()
    own_environment()
    raise_nofile()
    trees = [("A", args.a.resolve(), args.settings_a)]
    if args.b is not None:
        trees.append(("B", args.b.resolve(), args.settings_b))
    asyncio.run(compare(trees, args.rounds, args.notify, args.durable_peer))


if __name__ == "__main__":
    main()
