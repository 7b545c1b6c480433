"""Create the default room (AGENT_SALON_DEFAULT_ROOM, `salon` unless set), where a
caller that names no room and has none of its own meets everyone else."""

from django.conf import settings
from django.db import migrations


def create_default_room(apps, schema_editor):
    Room = apps.get_model("bus", "Room")
    Room.objects.get_or_create(name=settings.DEFAULT_ROOM)


class Migration(migrations.Migration):
    dependencies = [("bus", "0001_initial")]

    operations = [migrations.RunPython(create_default_room, migrations.RunPython.noop)]
