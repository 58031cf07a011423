"""The pages' daily rollups: the hourly class and cost rollups summed per UTC day, without the
source and the rule set, with the business line beside the dim set. They hold up to 24 times
fewer rows than the hourly ones, which is what keeps a month's pages fast (docs/dashboards.md).

They are derived, never written by ingest: a trigger on the hourly tables marks each day a
statement changes as stale (StaleDay), and `apps.dashboards.rollup.refresh_day` rebuilds a
day from the hourly rows. Readers take a day from here only when it is not stale, and the
rest of their window from the hourly rows, so a page is never behind the hourly rollups."""

from __future__ import annotations

from django.db import models

from apps.classification.engine import COMPONENTS
from apps.classification.models import Reason
from apps.ingest.models import ROLLUP_REF, DimSet, ServedModel
from apps.pricing.models import Currency


class _ClassTokens(models.Model):
    """What every class and cost rollup of the pages keys and sums by: the model, the business
    line, the class.reason and the component, and their tokens (each rollup adds its time bucket,
    and the dim set or the currency and cost where it keeps them)."""

    model = models.ForeignKey(ServedModel, related_name="+", **ROLLUP_REF)
    business_line = models.CharField(max_length=256, blank=True, default="")
    reason = models.ForeignKey(Reason, related_name="+", **ROLLUP_REF)
    component = models.SmallIntegerField(choices=list(enumerate(COMPONENTS)))
    tokens = models.BigIntegerField()

    class Meta:
        abstract = True


class DailyClass(_ClassTokens):
    """Tokens per UTC day (its midnight), model, rollup dim set, class.reason and component."""

    day = models.DateTimeField()
    dims = models.ForeignKey(DimSet, related_name="+", **ROLLUP_REF)

    class Meta:
        indexes = [
            models.Index(fields=["day"], name="dashboards_dailyclass_day"),
            # Covering what a class's or reason's rows are summed by dim set and line (the waste
            # levels, the overview's most wasteful features and steps): read from the index alone.
            models.Index(
                fields=["reason", "day"],
                include=["dims", "business_line", "tokens"],
                name="dashboards_dailyclass_reason",
            ),
        ]


class DailyCost(_ClassTokens):
    """Priced tokens and their cost per UTC day, model, rollup dim set, reason, component and currency."""

    day = models.DateTimeField()
    dims = models.ForeignKey(DimSet, related_name="+", **ROLLUP_REF)
    currency = models.CharField(max_length=3, choices=Currency.choices)
    cost = models.DecimalField(max_digits=30, decimal_places=12)

    class Meta:
        indexes = [
            models.Index(fields=["day"], name="dashboards_dailycost_day"),
            models.Index(fields=["reason", "day"], name="dashboards_dailycost_reason"),
        ]


class StaleDay(models.Model):
    """An hour whose hourly rollups changed (`day` is its UTC day): written by the triggers on the
    hourly tables without a unique key, so concurrent writers never wait on each other. A day's
    daily rows stop serving once an hour before their BuiltDay.through is marked; refresh_day
    deletes the marks of the hours it covered."""

    day = models.DateField(db_index=True)
    hour = models.DateTimeField(db_index=True)


class BuiltDay(models.Model):
    """The daily rows of `day` hold the hourly rows of the hours before `through` (the day's end,
    or the hour in progress when the day was built)."""

    day = models.DateField(primary_key=True)
    through = models.DateTimeField()


class DailyLineClass(_ClassTokens):
    """DailyClass summed over the dim sets but the business line: what the overview and the top
    levels of the drill-down read (about ten times fewer rows again)."""

    day = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["day"], name="dashboards_dailylineclass_day")]


class DailyLineCost(_ClassTokens):
    """DailyCost summed over the dim sets but the business line."""

    day = models.DateTimeField()
    currency = models.CharField(max_length=3, choices=Currency.choices)
    cost = models.DecimalField(max_digits=30, decimal_places=12)

    class Meta:
        indexes = [models.Index(fields=["day"], name="dashboards_dailylinecost_day")]


class HourlyLineClass(_ClassTokens):
    """The hourly class rollup summed over the sources, rule sets and dim sets but the business
    line, for the built hours of each day (up to BuiltDay.through): what the overview draws by
    the hour (about five times fewer rows than the hourly rollup)."""

    hour = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["hour"], name="dashboards_hourlyline_hour")]


class SavedView(models.Model):
    """A named filter set of one user: a dashboards page and its query (window, dims, drill-down
    position, sort, search). Its link (/views/<id>/) opens the page so for whoever follows it,
    under their own role and lines: a shared view shows a colleague only what they may see."""

    user = models.ForeignKey("auth.User", on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=100)
    path = models.CharField(max_length=200)
    query = models.TextField(blank=True, default="")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="dashboards_savedview_user_name")]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def target(self) -> str:
        return self.path + ("?" + self.query if self.query else "")
