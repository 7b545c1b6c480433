"""Three foreign keys lose the index Django gave each: a unique constraint that starts with
the same column serves every lookup by it, and each index was one more B-tree written
by every send (bench/RESULTS.md). The indexes are dropped by name, so that no table is
rebuilt (SQLite's schema editor would copy a whole table for an AlterField)."""

import django.db.models.deletion
from django.db import migrations, models

# (model, field): the foreign keys whose own index goes.
COVERED = [("entry", "room"), ("wakedecision", "entry"), ("decisioncount", "entry")]


def _index_name(schema_editor, model, field_name: str) -> str:
    field = model._meta.get_field(field_name)
    return schema_editor._create_index_name(model._meta.db_table, [field.column], suffix="")


def drop_indexes(apps, schema_editor):
    for model_name, field_name in COVERED:
        model = apps.get_model("bus", model_name)
        name = schema_editor.quote_name(_index_name(schema_editor, model, field_name))
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


def create_indexes(apps, schema_editor):
    for model_name, field_name in COVERED:
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
                    model_name="decisioncount",
                    name="entry",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="bus.entry",
                    ),
                ),
                migrations.AlterField(
                    model_name="entry",
                    name="room",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="entries",
                        to="bus.room",
                    ),
                ),
                migrations.AlterField(
                    model_name="wakedecision",
                    name="entry",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="decisions",
                        to="bus.entry",
                    ),
                ),
            ],
        ),
    ]
