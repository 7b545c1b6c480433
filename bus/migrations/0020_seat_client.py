"""Who sits in a seat (bus.models.Seat.client).

On SQLite, adding a NOT NULL column remakes the table, and a remade table has lost its
triggers: the roster stamp's trigger on bus_seat (0010_roster_stamp) is made again.
"""

from django.db import migrations, models

SEAT_TRIGGER = (
    "CREATE TRIGGER IF NOT EXISTS bus_roster_seat_changed "
    "AFTER UPDATE OF name, agent_id, quiet, quiet_until ON bus_seat "
    "WHEN OLD.name IS NOT NEW.name OR OLD.agent_id IS NOT NEW.agent_id "
    "OR OLD.quiet IS NOT NEW.quiet OR OLD.quiet_until IS NOT NEW.quiet_until "
    "BEGIN INSERT OR REPLACE INTO bus_rosterstamp (id, stamp) VALUES (1, random()); END"
)


def seat_trigger(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(SEAT_TRIGGER)


class Migration(migrations.Migration):
    dependencies = [
        ("bus", "0019_entry_search_pairs"),
    ]

    operations = [
        # Made again after the table is remade: going forward here, going back before.
        migrations.RunPython(migrations.RunPython.noop, seat_trigger),
        migrations.AddField(
            model_name="seat",
            name="client",
            field=models.CharField(blank=True, default="", max_length=16),
        ),
        migrations.RunPython(seat_trigger, migrations.RunPython.noop),
    ]
