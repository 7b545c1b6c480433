from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class SalonConfig(AppConfig):
    """The project itself: its templates, and the daemon's metrics listening to the bus."""

    default = True
    name = "salon"
    verbose_name = "agent-salon"

    def ready(self) -> None:
        from django.contrib.auth import signals as auth_signals

        from bus import signals
        from salon import metrics, sessions

        signals.wake_decided.connect(metrics.count_wake_decisions, dispatch_uid="salon.metrics")
        metrics.expose_store_figures()
        auth_signals.user_logged_in.connect(sessions.on_login, dispatch_uid="salon.sessions")
        auth_signals.user_logged_out.connect(sessions.on_logout, dispatch_uid="salon.sessions")


class AdminConfig(admin_apps.AdminConfig):
    """Django's admin, with the staff's site of bus.admin (its stats page and index)."""

    default = False  # named in INSTALLED_APPS; the project's own app is SalonConfig
    default_site = "salon.staff.SalonAdminSite"
