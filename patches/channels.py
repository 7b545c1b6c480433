"""channels: the in-process channel layer of the embedded default (no Redis), made O(1)
per message.

Channels 4.3's InMemoryChannelLayer calls _clean_expired() on every send, group_send and
receive, and that walks every channel and every group membership of the process: with N
open streams a message costs O(N), and a broadcast to N streams (N group_sends, N
receives) costs O(N²). bench/RESULTS.md §5 measured it at 15 % of a 500-stream fan-out;
a broadcast to 500 streams took 2.9-3.8 s with it, 1.9-2.1 s with the sweep below alone
(and 0.48-0.60 s with the one-claim fan-out of mcpgate/delivery.py as well).

Here the sweep runs at most once every SWEEP_SECONDS. What that changes: a doorbell older
than the layer's expiry (60 s) may be received up to SWEEP_SECONDS late instead of being
dropped, and a dead channel leaves its groups up to SWEEP_SECONDS later. Both are
harmless for a doorbell: a ring only makes a stream re-read the ledger.
"""

from __future__ import annotations

import time

from channels.layers import InMemoryChannelLayer

# Overrides the private _clean_expired, which every send, group_send and receive calls.
WRITTEN_FOR = {"channels": ("4.2", "4.4")}

SWEEP_SECONDS = 1.0


class SweepingInMemoryChannelLayer(InMemoryChannelLayer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._swept_at = float("-inf")

    def _clean_expired(self) -> None:
        at = time.monotonic()
        if at - self._swept_at < SWEEP_SECONDS:
            return
        self._swept_at = at
        super()._clean_expired()
