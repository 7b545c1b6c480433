"""channels_redis: the Redis channel layer of scale-out (REDIS_URL), kept apart from
patches.channels so that the embedded default never imports redis.

Its gain is not speed but a message: without it, 1 run in 5 of a checkin's test lost the
rebind the checkin sends (measured on 2026-12-01, below).
"""

from __future__ import annotations

import asyncio

from channels_redis.core import RedisChannelLayer

# Replaces the private _brpop_with_clean, and uses _backup_channel_name and connection():
# a new minor version is taken only after tests/test_redis_layer.py passes on it.
WRITTEN_FOR = {"channels_redis": ("4.2", "4.4")}


class CancelSafeRedisChannelLayer(RedisChannelLayer):
    """channels_redis's layer, without the message a cancelled receive() drops.

    All consumers of a process share one Redis queue; whichever of them holds the
    layer's receive lock waits in a blocking pop (BZPOPMIN, up to 5 s) for all of
    them. When that consumer ends, channels cancels its receive(). redis-py lets the
    pop go on at the server and drops its answer, so the next message for any consumer
    of the process was taken off the queue and delivered to nobody: the session.rebind
    a checkin sends as its consumer ends, or a doorbell. Measured on 2026-12-01: 1 run
    in 5 of test_a_stream_follows_its_session_after_checkin lost the rebind, and the
    stream kept its old seat for good.

    Here the pop runs in a task of its own that the cancel does not reach. Whatever it
    takes after its caller is gone goes back into the queue with its own score (so in
    its old place); a message it took as the cancel arrived, and had already put in the
    backup queue, is moved back the same way.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._stray_pops: set[asyncio.Task] = set()

    async def _brpop_with_clean(self, index, channel, timeout):
        connection = self.connection(index)
        backup = self._backup_channel_name(channel)
        # What an earlier receive popped and never finished goes back first.
        await connection.eval(REQUEUE_BACKUP, 2, channel, backup)
        caller_gone = asyncio.Event()
        pop = asyncio.ensure_future(self._pop(connection, channel, backup, timeout, caller_gone))
        try:
            popped = await asyncio.shield(pop)
        except asyncio.CancelledError:
            caller_gone.set()
            self._stray_pops.add(pop)
            pop.add_done_callback(
                lambda done: self._after_stray_pop(done, connection, channel, backup)
            )
            raise
        return None if popped is None else popped[0]

    def _after_stray_pop(self, pop: asyncio.Task, connection, channel, backup) -> None:
        """A pop whose caller was cancelled has ended: if it got as far as the backup
        queue, its message goes back into the queue."""
        self._stray_pops.discard(pop)
        if pop.cancelled() or pop.exception() is not None or pop.result() is None:
            return
        member, score = pop.result()
        requeue = asyncio.ensure_future(
            connection.eval(REQUEUE_ONE, 2, channel, backup, member, score)
        )
        self._stray_pops.add(requeue)
        requeue.add_done_callback(self._stray_pops.discard)

    @staticmethod
    async def _pop(connection, channel, backup, timeout, caller_gone):
        """(member, score) or None; into the backup queue while someone awaits it, back
        into the queue once nobody does."""
        popped = await connection.bzpopmin(channel, timeout=timeout)
        if popped is None:
            return None
        _, member, score = popped
        if caller_gone.is_set():
            await connection.zadd(channel, {member: float(score)})
            return None
        await connection.zadd(backup, {member: float(score)})
        return member, float(score)


# KEYS[1] the queue, KEYS[2] its backup: every backed-up message back into the queue.
REQUEUE_BACKUP = """
local backed_up = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
for i = 1, #backed_up, 2 do
    redis.call('ZADD', KEYS[1], backed_up[i + 1], backed_up[i])
end
redis.call('DEL', KEYS[2])
"""

# One message (ARGV[1], score ARGV[2]) from the backup back into the queue, if it is
# still in the backup (a later receive may have moved it back already).
REQUEUE_ONE = """
if redis.call('ZREM', KEYS[2], ARGV[1]) == 1 then
    redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
end
"""
