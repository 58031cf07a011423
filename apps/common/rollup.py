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

from apps.common.composed import SQL, Composable, Composed, Identifier, Placeholder, commas, names


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

    def clear(self) -> Composed:
        """Delete the rollup's rows whose time (its key's first column) is in [%s, %s)."""
        return SQL("DELETE FROM {table} WHERE {time} >= %s AND {time} < %s").format(
            table=Identifier(self.table), time=Identifier(self.key[0])
        )

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


@dataclass(frozen=True)
class Marks:
    """A consumer's table of change marks: the hours (or days) an upstream change touched, which
    the consumer rebuilds and then clears. Writers only append (no unique key, an existing mark is
    not repeated), so concurrent writers never wait on each other; a trigger on the upstream
    rollup or the consumer's own service writes them (docs/architecture.md, "Change detection").
    `column` is the time column of a mark; `day` the column of its UTC day where the table has one."""

    table: str
    column: str
    day: str | None = None

    def mark(self) -> Composed:
        """Mark the instants of the array parameter (timestamptz[]) not marked yet."""
        return SQL(
            "INSERT INTO {table} ({column}) SELECT h FROM unnest(%s::timestamptz[]) AS h\n"
            "WHERE NOT EXISTS (SELECT 1 FROM {table} d WHERE d.{column} = h)"
        ).format(table=Identifier(self.table), column=Identifier(self.column))

    def marked(self, *, before: bool = False) -> Composed:
        """The marked days (with a `day` column) or instants, each once, oldest first; only those
        of marks before the parameter when `before`."""
        unit = Identifier(self.day or self.column)
        where = SQL(" WHERE {} < %s").format(Identifier(self.column)) if before else SQL("")
        return SQL("SELECT DISTINCT {unit} FROM {table}{where} ORDER BY {unit}").format(
            unit=unit, table=Identifier(self.table), where=where
        )

    def clear(self) -> Composed:
        """Clear the marks of the instants of the array parameter."""
        return SQL("DELETE FROM {} WHERE {} = ANY(%s)").format(Identifier(self.table), Identifier(self.column))

    def take(self) -> Composed:
        """Clear the marks in [%s, %s) and return their instants."""
        return SQL("DELETE FROM {table} WHERE {c} >= %s AND {c} < %s RETURNING {c}").format(
            table=Identifier(self.table), c=Identifier(self.column)
        )

    def clear_day(self, *, day: str, before: str) -> Composed:
        """Clear the marks of the day named by the parameter `day` before the one named `before`."""
        if self.day is None:
            raise ValueError(f"{self.table} has no day column")
        return SQL("DELETE FROM {table} WHERE {day} = {p_day} AND {c} < {p_before}").format(
            table=Identifier(self.table),
            day=Identifier(self.day),
            c=Identifier(self.column),
            p_day=Placeholder(day),
            p_before=Placeholder(before),
        )
