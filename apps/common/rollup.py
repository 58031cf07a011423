"""A rollup declared once: its table, its key, its measures and its grain, and the statements
that keep it, generated from the declaration instead of written by hand for each table.

A rollup is summed from a source (the records, or a finer rollup) by its key at its grain (an
hour or a day); its measures add up, so a batch of new rows is added with one upsert, in key
order (concurrent writers lock rollup rows in the same order). The stages declare their own
rollups (ingest's HourlyUsage, classification's HourlyClass, the dashboards' daily rollups); the
change marks a downstream stage keeps of them are described in docs/architecture.md, "Change
detection"."""

from __future__ import annotations

from dataclasses import dataclass

from apps.common.composed import SQL, Composable, Composed, Identifier, commas, names


@dataclass(frozen=True)
class Rollup:
    """A rollup table: `key` its unique key (its time column, `grain` wide, first), `measures`
    the columns summed over the rows of a key."""

    table: str
    key: tuple[str, ...]
    measures: tuple[str, ...]
    grain: str = "hour"

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.key, *self.measures)

    def upsert(self, rows: Composable, *, alias: str = "u") -> Composed:
        """Add `rows` (a relation of the key and measure columns, in that order) to the rollup, in
        key order: a key already there gets the sums added, a new one is inserted."""
        key = names(self.key)
        added = commas(
            SQL("{m} = {t}.{m} + excluded.{m}").format(m=Identifier(m), t=Identifier(alias)) for m in self.measures
        )
        return SQL(
            "INSERT INTO {table} AS {alias} ({columns})\n    SELECT * FROM {rows} ORDER BY {key}\n"
            "    ON CONFLICT ({key}) DO UPDATE SET {added}"
        ).format(
            table=Identifier(self.table),
            alias=Identifier(alias),
            columns=names(self.columns),
            rows=rows,
            key=key,
            added=added,
        )
