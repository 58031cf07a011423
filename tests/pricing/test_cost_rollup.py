"""The cost rollup declared once (apps.pricing.services.COSTS): its key is the table's unique
key, and the statements that price an hour name its columns from the declaration, exactly."""

from __future__ import annotations

from apps.pricing import services
from apps.pricing.models import HourlyCost

KEY = '"hour", "source_id", "model_id", "dims_id", "reason_id", "component"'


def test_the_cost_rollup_key_is_the_tables_unique_key() -> None:
    [key] = [c for c in HourlyCost._meta.constraints if c.name == "pricing_hourlycost_key"]
    assert services.COSTS.key == tuple(HourlyCost._meta.get_field(f).column for f in key.fields)
    assert services.COSTS.table == HourlyCost._meta.db_table
    assert {f.column for f in HourlyCost._meta.concrete_fields} == {"id", *services.COSTS.columns, *services._BASIS}


def test_the_price_books_rows_are_the_classified_tokens_at_their_price() -> None:
    hc_key = ", ".join(f'"hc".{c}' for c in KEY.split(", "))
    assert services._BOOK_ROWS == (
        f'INSERT INTO "pricing_hourlycost" ({KEY}, "tokens", "cost", "currency", "price_version_id", "pool_id") '
        f"SELECT {hc_key}, SUM(hc.tokens), SUM(hc.tokens) * b.per_million * 0.000001, b.currency, b.version_id, NULL "
        'FROM "classification_hourlyclass" hc '
        "JOIN unnest(%s::timestamptz[], %s::int[], %s::smallint[], %s::numeric[], %s::text[], %s::bigint[]) "
        "  AS b(hour, model_id, component, per_million, currency, version_id) "
        "  ON hc.hour = b.hour AND hc.model_id = b.model_id AND hc.component = b.component "
        "WHERE hc.hour = ANY(%s) "
        f"GROUP BY {hc_key}, b.per_million, b.currency, b.version_id "
        "HAVING SUM(hc.tokens) > 0"
    )


def test_a_pools_rows_are_read_and_written_in_the_cost_rollups_key() -> None:
    assert services._POOL_ROWS == (
        f'SELECT {KEY}, SUM(tokens) FROM "classification_hourlyclass" WHERE hour = ANY(%s) AND model_id = ANY(%s) '
        f"GROUP BY {KEY} HAVING SUM(tokens) > 0 ORDER BY {KEY}"
    )
    assert [name for name, _ in services._POOL_COST_COLUMNS] == [*services.COSTS.columns, "currency", "pool_id"]
