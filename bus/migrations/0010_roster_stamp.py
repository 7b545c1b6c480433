"""The roster stamp (bus.models.RosterStamp) and, on SQLite, the triggers that write it."""

from django.db import migrations, models

# Each names its table, its event and, for an UPDATE, the columns whose change counts.
# `IS NOT` is SQLite's null-safe "differs".
SQLITE_TRIGGERS = {
    "bus_roster_membership_added": "AFTER INSERT ON bus_membership",
    "bus_roster_membership_removed": "AFTER DELETE ON bus_membership",
    "bus_roster_membership_changed": (
        "AFTER UPDATE OF seat_id, room_id, left_at ON bus_membership "
        "WHEN OLD.seat_id IS NOT NEW.seat_id OR OLD.room_id IS NOT NEW.room_id "
        "OR OLD.left_at IS NOT NEW.left_at"
    ),
    "bus_roster_seat_changed": (
        "AFTER UPDATE OF name, agent_id, quiet, quiet_until ON bus_seat "
        "WHEN OLD.name IS NOT NEW.name OR OLD.agent_id IS NOT NEW.agent_id "
        "OR OLD.quiet IS NOT NEW.quiet OR OLD.quiet_until IS NOT NEW.quiet_until"
    ),
    "bus_roster_agent_renamed": ("AFTER UPDATE OF name ON bus_agent WHEN OLD.name IS NOT NEW.name"),
}
NEW_STAMP = "INSERT OR REPLACE INTO bus_rosterstamp (id, stamp) VALUES (1, random())"


def create_triggers(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return  # see RosterStamp: never written there
    for name, when in SQLITE_TRIGGERS.items():
        schema_editor.execute(f"CREATE TRIGGER {name} {when} BEGIN {NEW_STAMP}; END")
    schema_editor.execute(NEW_STAMP)


def drop_triggers(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    for name in SQLITE_TRIGGERS:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [("bus", "0009_triage")]

    operations = [
        migrations.CreateModel(
            name="RosterStamp",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("stamp", models.BigIntegerField()),
            ],
        ),
        migrations.RunPython(create_triggers, drop_triggers),
    ]
