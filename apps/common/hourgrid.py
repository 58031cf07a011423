"""The grid of the hour rollups: at which minute past each UTC hour their hours start.

The hour rollups are kept in the hour buckets of the accounting zone (buckets.hour_origin): on
the UTC hours for a whole-hour zone, at :30 for Asia/Kolkata, at :15 for Asia/Kathmandu. Rows
written while the books were kept in a zone of other minutes (Asia/Shanghai, then Asia/Kolkata)
lie on another grid: adding this zone's hours to them, or cutting its days out of them, would
split hours between days. The apps register their hour tables here (`hour_table_register`, from
their `ready()`); `grid_check` reads one row of each (all the rows of a table share one grid)
and refuses such a zone with HourGridError, which names what to do. Ingest checks before the first
batch of a process, the accrual before booking, and the system check costplatform.E002 on
`migrate` and `manage.py check --database default`.
"""

from __future__ import annotations

from datetime import UTC, timedelta

from django.db import connection
from django.db.models import Model

from apps.common.buckets import SETTING, ZoneError, hour_origin, zone_name
from apps.common.composed import SQL, table, text

OTHER_GRID = (
    "{setting}={name!r} keeps its hours from :{want:02d} past each UTC hour, but {table} holds hours "
    "that start at :{have:02d} (written while the books were kept in a zone of other minutes): its rows "
    "cannot be cut into this zone's days. Set {setting} back to a zone whose hours start at :{have:02d}, "
    "or start these books on a new database and load the records again (docs/ledger.md, "
    "'Zones of half hours')."
)

_tables: list[type[Model]] = []


class HourGridError(ZoneError):
    """The stored hour rollups lie on another grid than the accounting zone's hours."""


def hour_table_register(*models: type[Model]) -> None:
    """Models with an `hour` column holding the start of an hour bucket."""
    _tables.extend(m for m in models if m not in _tables)


def grid_problem() -> str | None:
    """Why the stored hours do not fit the accounting zone's hour buckets, or None when they do
    (or no rows are stored). Tables not created yet (before `migrate`) are skipped."""
    origin = hour_origin()
    present = set(connection.introspection.table_names())
    with connection.cursor() as cursor:
        for model in _tables:
            if model._meta.db_table not in present:
                continue
            cursor.execute(text(SQL("SELECT hour FROM {} LIMIT 1").format(table(model))))
            row = cursor.fetchone()
            if row is None:
                continue
            have = row[0].astimezone(UTC).minute
            if timedelta(minutes=have) != origin or row[0].second or row[0].microsecond:
                return OTHER_GRID.format(
                    setting=SETTING,
                    name=zone_name(),
                    want=origin // timedelta(minutes=1),
                    table=model._meta.db_table,
                    have=have,
                )
    return None


def grid_check() -> None:
    """Raise HourGridError where the stored hours lie on another grid than the zone's."""
    problem = grid_problem()
    if problem is not None:
        raise HourGridError(problem)
