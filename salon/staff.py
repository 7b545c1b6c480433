"""The staff's admin site: the titles, the index with its links to the stats page and the
live view, and those pages' URLs (the pages themselves are bus.admin's; the live view's
event stream is served beside Django, salon.asgi). Made Django's default site by
salon.apps.AdminConfig; it lives outside bus.admin because importing that package
registers the pages on the default site, which must exist by then."""

from __future__ import annotations

from django.contrib import admin
from django.urls import path


class SalonAdminSite(admin.AdminSite):
    site_header = "agent-salon"
    site_title = "agent-salon staff"
    index_title = "History, rooms and seats"
    # The history table needs the width more than a second menu does.
    enable_nav_sidebar = False
    # There is no public site behind the admin: no "View site" link.
    site_url = None
    # The index links to the stats page (a box above the app list).
    index_template = "admin/stats_index.html"

    def get_urls(self):
        from bus.admin.live import live_view
        from bus.admin.stats import stats_view

        return [
            path("stats/", self.admin_view(stats_view), name="salon_stats"),
            path("live/", self.admin_view(live_view), name="salon_live"),
            *super().get_urls(),
        ]
