"""What the bus announces to whoever listens (the daemon's metrics): Django signals,
sent after the transaction that did the work has committed. The domain never knows
who listens; a process with no receiver (a CLI command) counts nothing."""

from django.dispatch import Signal

# A send decided who it wakes: `reasons`, how many readers of the room got each wake reason
# ({reason: count}).
wake_decided = Signal()

# An entry was stored (sent here, or landed from another machine): `room` (its name),
# `seq`, `via`. The relay's bridge pushes the entries of bridged rooms on it.
entry_stored = Signal()

# A request with an ask key was stored with a verdict that holds it (serve, gate, deny):
# `entry_id`. bus.services.serving settles it, in the process that stored it.
request_decided = Signal()
