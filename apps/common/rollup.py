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

from apps.common.composed import SQL, Composable, Composed, Identifier, Literal, Placeholder, commas, names, text


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
    rollup (`MarkTrigger`) or the consumer's own service writes them (docs/architecture.md,
    "Change detection"). `column` is the time column of a mark, of SQL type `type` (an instant, or
    the UTC date of a day's marks); `day` the column of its UTC day where the table has one. A
    table `keyed` by `column` (one row a mark) skips a mark already there by its key instead.
    Marks without a key have Django's `id`, which tells the marks read from those written later."""

    table: str
    column: str
    day: str | None = None
    type: str = "timestamptz"
    keyed: bool = False

    def value(self, hour: Composable) -> Composable:
        """The mark of the hour bucket starting at the instant `hour`: the instant, or its UTC date."""
        return SQL("({} AT TIME ZONE 'UTC')::date").format(hour) if self.type == "date" else hour

    def mark(self) -> Composed:
        """Mark the instants (or days) of the array parameter not marked yet."""
        return self.mark_from(SQL("unnest(%s::{}[]) AS h").format(SQL(self.type)))

    def mark_from(self, marks: Composable) -> Composed:
        """Mark the values of the relation `marks` (of one column, `h`) not marked yet."""
        columns, values = [Identifier(self.column)], [SQL("h")]
        if self.day is not None:
            columns.append(Identifier(self.day))
            values.append(SQL("(h AT TIME ZONE 'UTC')::date"))
        skip = (
            SQL("ON CONFLICT DO NOTHING")
            if self.keyed
            else SQL("WHERE NOT EXISTS (SELECT 1 FROM {} d WHERE d.{} = h)").format(
                Identifier(self.table), Identifier(self.column)
            )
        )
        return SQL("INSERT INTO {table} ({columns}) SELECT {values} FROM {marks}\n{skip}").format(
            table=Identifier(self.table), columns=commas(columns), values=commas(values), marks=marks, skip=skip
        )

    def marked(self, *, before: bool = False, through: bool = False, within: bool = False) -> Composed:
        """The marked days (with a `day` column) or instants, each once, oldest first; only those
        of marks before the parameter when `before`, of the marks up to the id of the parameter
        (`latest`) when `through`, from the first parameter to the second (both in) when `within`."""
        unit = Identifier(self.day or self.column)
        where: Composable = SQL("")
        if before:
            where = SQL(" WHERE {} < %s").format(Identifier(self.column))
        elif through:
            where = SQL(" WHERE id <= %s")
        elif within:
            where = SQL(" WHERE {unit} >= %s AND {unit} <= %s").format(unit=unit)
        return SQL("SELECT DISTINCT {unit} FROM {table}{where} ORDER BY {unit}").format(
            unit=unit, table=Identifier(self.table), where=where
        )

    def latest(self) -> Composed:
        """The id of the latest mark (NULL when there is none): a consumer reads and clears the
        marks up to it, and a mark written meanwhile stays for its next run."""
        return SQL("SELECT max(id) FROM {}").format(Identifier(self.table))

    def clear(self) -> Composed:
        """Clear the marks of the instants (or days) of the array parameter."""
        return SQL("DELETE FROM {} WHERE {} = ANY(%s)").format(Identifier(self.table), Identifier(self.column))

    def clear_through(self) -> Composed:
        """Clear the marks up to the id of the parameter (`latest`)."""
        return SQL("DELETE FROM {} WHERE id <= %s").format(Identifier(self.table))

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


_EVENTS = ("INSERT", "UPDATE", "DELETE")


@dataclass(frozen=True)
class MarkTrigger:
    """The trigger by which a consumer learns what changed upstream: after every statement on the
    upstream rollups `on` (tables with an `hour` column), its function `function` marks in
    `marks` the hours (or days) of the rows the statement inserted, updated or deleted, read from
    the transition table `changed`, in the statement's transaction. Its triggers are named
    `{name}_insert`, `{name}_update` and `{name}_delete` on each table. With `lock`, the function
    first holds the advisory lock (`lock`, the day's number from 1970-01-01) of each UTC day it
    changed shared, until the writer commits: a consumer rebuilding a day takes it exclusively.

    The migrations install what this generates; tests/common/test_mark_triggers.py checks that
    the database holds exactly that."""

    marks: Marks
    function: str
    name: str
    on: tuple[str, ...]
    lock: int | None = None

    def body(self) -> str:
        """The function's PL/pgSQL body, as PostgreSQL keeps it (pg_proc.prosrc)."""
        changed = SQL("(SELECT DISTINCT {} FROM changed) AS c(h)").format(self.marks.value(SQL("hour")))
        insert = text(self.marks.mark_from(changed)).replace("\n", "\n    ")
        if self.lock is None:
            return f"\nBEGIN\n    {insert};\n    RETURN NULL;\nEND\n"
        hold = SQL(
            "    FOR changed_day IN SELECT DISTINCT (hour AT TIME ZONE 'UTC')::date FROM changed ORDER BY 1 LOOP\n"
            "        PERFORM pg_advisory_xact_lock_shared({lock}, changed_day - DATE '1970-01-01');\n"
            "    END LOOP;\n"
        ).format(lock=Literal(int(self.lock)))
        return f"\nDECLARE\n    changed_day date;\nBEGIN\n{text(hold)}    {insert};\n    RETURN NULL;\nEND\n"

    def create_function(self) -> str:
        """The statement that installs (or replaces) the function."""
        return f"CREATE OR REPLACE FUNCTION {self.function}() RETURNS trigger LANGUAGE plpgsql AS $${self.body()}$$;"

    def triggers(self) -> tuple[str, ...]:
        """The statements that create the triggers, as pg_get_triggerdef gives them back (less
        the schema of the table)."""
        return tuple(
            f"CREATE TRIGGER {self.name}_{event.lower()} AFTER {event} ON {table} "
            f"REFERENCING {'OLD' if event == 'DELETE' else 'NEW'} TABLE AS changed "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {self.function}()"
            for table in self.on
            for event in _EVENTS
        )
