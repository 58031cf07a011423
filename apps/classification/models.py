from __future__ import annotations

import re

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from apps.accounts.models import CollectorKey
from apps.classification.engine import BUILTIN_RULES, CLASSES, COMPONENT_GROUPS, COMPONENTS
from apps.classification.rules import RuleError, parse_rule
from apps.ingest.models import ROLLUP_REF, DimSet, ServedModel

REASON_NAME = re.compile(r"^(effective|waste|cache|shadow)\.[a-z][a-z0-9_]{0,39}$")


class Reason(models.Model):
    """A class.reason, e.g. waste.truncated. Built-ins have fixed ids below 100."""

    id = models.SmallIntegerField(primary_key=True)
    name = models.CharField(max_length=48, unique=True)
    builtin = models.BooleanField(default=False)

    class Meta:
        verbose_name = _("reason")
        verbose_name_plural = _("reasons")
        ordering = ["id"]

    def __str__(self) -> str:
        return self.name

    @property
    def token_class(self) -> str:
        return self.name.split(".", 1)[0]


class RuleSet(models.Model):
    """A version of the classification rules. Drafts are edited; one set is active; a set
    that was active is never edited again, so every classification can name its version."""

    class Status(models.TextChoices):
        DRAFT = "draft"
        ACTIVE = "active"
        RETIRED = "retired"

    version = models.PositiveIntegerField(unique=True)
    name = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.DRAFT)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    activated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("rule set")
        verbose_name_plural = _("rule sets")
        ordering = ["-version"]
        constraints = [
            models.UniqueConstraint(
                fields=["status"], condition=models.Q(status="active"), name="classification_one_active_ruleset"
            )
        ]

    def __str__(self) -> str:
        return f"v{self.version} ({self.status})" + (f" {self.name}" if self.name else "")


def validate_components(value: str) -> None:
    names = [part.strip() for part in value.split(",") if part.strip()]
    unknown = [n for n in names if n not in COMPONENTS and n not in COMPONENT_GROUPS]
    if not names or unknown:
        allowed = ", ".join((*COMPONENTS, *COMPONENT_GROUPS))
        raise ValidationError(f"unknown token component(s) {unknown or value!r}; use: {allowed}")


def validate_reason_name(value: str) -> None:
    if not REASON_NAME.match(value):
        raise ValidationError(
            f"{value!r} is not class.reason: class one of {', '.join(CLASSES)}, reason lowercase [a-z0-9_]"
        )


def validate_expression(value: str) -> None:
    try:
        parse_rule(value)
    except RuleError as exc:
        raise ValidationError(str(exc)) from exc


class Rule(models.Model):
    """One rule of a rule set: move token components to a class.reason when an expression
    holds, or turn a built-in rule off."""

    class Action(models.TextChoices):
        MOVE = "move"
        DISABLE = "disable"

    ruleset = models.ForeignKey(RuleSet, on_delete=models.CASCADE, related_name="rules")
    position = models.PositiveIntegerField(default=0)
    name = models.CharField(max_length=100)
    action = models.CharField(max_length=8, choices=Action.choices, default=Action.MOVE)
    expression = models.TextField(blank=True, validators=[validate_expression])
    components = models.CharField(max_length=200, blank=True, help_text="e.g. completion or output,structural")
    target = models.CharField(max_length=48, blank=True, help_text="class.reason, e.g. waste.summary_too_long")
    builtin = models.CharField(max_length=20, blank=True, choices=[(name, name) for name in BUILTIN_RULES])

    class Meta:
        ordering = ["ruleset", "position", "id"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.action == self.Action.MOVE:
            errors = {}
            for name, check in (
                ("expression", validate_expression),
                ("components", validate_components),
                ("target", validate_reason_name),
            ):
                try:
                    check(getattr(self, name))
                except ValidationError as exc:
                    errors[name] = exc.messages
            if errors:
                raise ValidationError(errors)
        elif self.builtin not in BUILTIN_RULES:
            raise ValidationError({"builtin": f"name a built-in rule: {', '.join(BUILTIN_RULES)}"})

    def component_ids(self) -> tuple[int, ...]:
        ids: list[int] = []
        for part in (p.strip() for p in self.components.split(",") if p.strip()):
            ids.extend(COMPONENT_GROUPS[part] if part in COMPONENT_GROUPS else (COMPONENTS.index(part),))
        return tuple(sorted(set(ids)))


class HourlyClass(models.Model):
    """Tokens per hour, source, model, rollup dims, rule set, class.reason and component.
    Written with the records at ingest; replaced day by day by reclassification."""

    # Written by the hundred on every ingest and replaced by the day: no foreign-key checks or
    # single-column indexes (ids come from rows that are never deleted; the key leads with the
    # hour and serves the reads). See ingest.HourlyUsage. The key is the primary key: a
    # surrogate id would cost each new row a second index entry.
    pk = models.CompositePrimaryKey("hour", "source", "model", "dims", "ruleset", "reason", "component")
    hour = models.DateTimeField()
    source = models.ForeignKey(CollectorKey, related_name="+", **ROLLUP_REF)
    model = models.ForeignKey(ServedModel, related_name="+", **ROLLUP_REF)
    dims = models.ForeignKey(DimSet, related_name="+", **ROLLUP_REF)
    ruleset = models.ForeignKey(RuleSet, related_name="+", **ROLLUP_REF)
    reason = models.ForeignKey(Reason, related_name="+", **ROLLUP_REF)
    component = models.SmallIntegerField(choices=list(enumerate(COMPONENTS)))
    tokens = models.BigIntegerField(default=0)


class DirtyDay(models.Model):
    """A day whose classification may be stale: a late record arrived before stored ones that
    it may turn into duplicates. One row a day, written and read through services.DIRTY; the
    reclassify job consumes these."""

    day = models.DateField(primary_key=True)

    def __str__(self) -> str:
        return self.day.isoformat()


def _share(name: str) -> models.DecimalField:
    return models.DecimalField(
        max_digits=5,
        decimal_places=4,
        null=True,
        blank=True,
        validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text=f"{name}, a fraction 0-1; empty: the default row's (or the seeds').",
    )


class HealthThreshold(models.Model):
    """The healthy range of the four health ratios (apps/classification/health.py). The row
    without a business line holds the defaults of every line; a line's row overrides the ones
    it sets. The overview, the health alert, the audit and the month-end checks all read this."""

    business_line = models.CharField(
        max_length=256, blank=True, unique=True, help_text="Empty: the defaults of every business line."
    )
    effective_min = _share("Effective ratio at least")
    waste_max = _share("Waste rate at most")
    cache_hit_min = _share("Cache hit rate at least")
    shadow_max = _share("Shadow ratio at most")
    note = models.CharField(max_length=300, blank=True, help_text="Why this line differs (an SLA, a batch job).")

    class Meta:
        verbose_name = _("health threshold")
        verbose_name_plural = _("health thresholds")
        ordering = ["business_line"]

    def __str__(self) -> str:
        return self.business_line or "(every business line)"
