"""Three foreign keys lose the index Django gave each: a unique constraint that starts with
the same column serves every lookup by it, and each index was one more B-tree written
by every send (bench/RESULTS.md). The indexes are dropped by name, so that no table is
rebuilt (SQLite's schema editor would copy a whole table for an AlterField)."""

import django.db.models.deletion
from django.db import migrations, models

# The foreign keys whose own index goes: (model, field, the model it points to, on_delete,
# related_name), as the models declare them.
COVERED = [
    ("entry", "room", "bus.room", django.db.models.deletion.PROTECT, "entries"),
    ("wakedecision", "entry", "bus.entry", django.db.models.deletion.CASCADE, "decisions"),
    ("decisioncount", "entry", "bus.entry", django.db.models.deletion.CASCADE, "+"),
]


def _index_name(schema_editor, model, field_name: str) -> str:
    field = model._meta.get_field(field_name)
    return schema_editor._create_index_name(model._meta.db_table, [field.column], suffix="")


def drop_indexes(apps, schema_editor):
    for model_name, field_name, *_ in COVERED:
        model = apps.get_model("bus", model_name)
        name = schema_editor.quote_name(_index_name(schema_editor, model, field_name))
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


def create_indexes(apps, schema_editor):
    for model_name, field_name, *_ in COVERED:
        model = apps.get_model("bus", model_name)
        field = model._meta.get_field(field_name)
        schema_editor.execute(
            schema_editor._create_index_sql(
                model, fields=[field], name=_index_name(schema_editor, model, field_name)
            )
        )


class Migration(migrations.Migration):
    dependencies = [("bus", "0010_roster_stamp")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(drop_indexes, create_indexes)],
            state_operations=[
                migrations.AlterField(
                    model_name=model_name,
                    name=field_name,
                    field=models.ForeignKey(
                        db_index=False, on_delete=on_delete, related_name=related, to=to
                    ),
                )
                for model_name, field_name, to, on_delete, related in COVERED
            ],
        ),
    ]
