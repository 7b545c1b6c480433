from django.apps import AppConfig


class BusConfig(AppConfig):
    name = "bus"
    verbose_name = "Bus"
    default_auto_field = "django.db.models.BigAutoField"
