from django.apps import AppConfig


class RelayConfig(AppConfig):
    """Entries across a boundary other than MCP: the /notify webhook, and the relay between
    machines (its server mode, and the bridge a daemon runs)."""

    name = "relay"
    verbose_name = "Relay"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The domain never reaches up: the bridge registers what it adds to the bus.
        from bus.services import rooms, serving
        from salond import companions

        rooms.add_room_notes(_room_notes)
        companions.add_companion(_bridge)
        companions.add_companion(_requests)
        serving.set_runner(_run_serve)


# Imported when called, not in ready(): hooks and cron set up this app on every turn, and
# the bridge's imports (httpx, cryptography) would cost each of them start-up time.


def _room_notes() -> dict[str, dict]:
    """{room: {"bridge": …}} for every bridged room (bus.services.rooms.list_rooms)."""
    from relay.models import BridgedRoom

    bridged = BridgedRoom.objects.select_related("room").order_by("room__name")
    return {b.room.name: {"bridge": b.status()} for b in bridged}


async def _bridge(host):
    from relay import bridge

    return await bridge.companion(host)


def _run_serve(argv, **kwargs):
    """A policy's serve command (relay.runner): imported when a request is served."""
    from relay import runner

    return runner.serve(argv, **kwargs)


async def _requests(host):
    from relay import requests

    return await requests.companion(host)
