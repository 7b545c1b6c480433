"""How every connection to the SQLite store is opened: Django's (salon.settings) and the
edit hooks' own (mcpgate.claude.claimwrite), so that a hook writing beside a running
daemon commits exactly as durably and waits for the write lock exactly as long. Daemon,
cron and hooks write at once: the write lock is taken at BEGIN (IMMEDIATE) and waited
for (busy_timeout) instead of failing on a lock upgrade; WAL lets readers go on.

Standard library only: the hooks import it without Django; bus, not salon, so that
mcpgate can import it (salon imports mcpgate)."""

SQLITE_BEGIN = "IMMEDIATE"
SQLITE_TIMEOUT = 20
SQLITE_PRAGMAS = ("journal_mode=WAL", "synchronous=FULL", "busy_timeout=20000")
