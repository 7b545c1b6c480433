"""The staff's pages (README, "The admin"): a read-only history browser over entries,
read-only pages for rooms, seats and file claims, and the stats page with its charts. Nothing here
writes: no add, change or delete permission on any bus model.

Django's admin autodiscovery imports this package; the modules below register their
pages with the default admin site (the project's: salon.staff).
"""

from bus.admin import claims, entries, rooms  # noqa: F401 (they register their pages)
