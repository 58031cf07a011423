from __future__ import annotations

from typing import Any

from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import get_language
from django.utils.translation import gettext_lazy as _

from apps.common.buckets import parse_month
from apps.common.labels import dims_text
from apps.ledger.finding_text import finding_text


class FindingKind(models.TextChoices):
    ZOMBIE = "zombie"
    DUPLICATE = "duplicate"
    LOOP = "loop"
    MODEL_MISMATCH = "model_mismatch"
    SYSTEM_PROMPT = "system_prompt"
    CONTEXT_BLOAT = "context_bloat"
    RETRY_STORM = "retry_storm"
    REASONING = "reasoning"
    LEDGER_CHECK = "ledger_check"


# Labels in report order: finders run in this order too (zombies first, see services).
KIND_LABELS: dict[str, Any] = {
    FindingKind.ZOMBIE: _("Zombie workloads"),
    FindingKind.DUPLICATE: _("Duplicate computation"),
    FindingKind.LOOP: _("Agent loops and over-calling"),
    FindingKind.MODEL_MISMATCH: _("Model mismatch"),
    FindingKind.SYSTEM_PROMPT: _("System-prompt overhead"),
    FindingKind.CONTEXT_BLOAT: _("Context bloat"),
    FindingKind.RETRY_STORM: _("Retry storms"),
    FindingKind.REASONING: _("Reasoning overspend"),
    FindingKind.LEDGER_CHECK: _("Ledger month-end checks"),
}


# What to do about a finding, for readers of other languages than English: the finder's stored
# suggestion is English prose with its figures in it; these say the same with the figures the
# finding keeps. The ledger's month-end checks keep their own message.
SUGGESTIONS: dict[str, Any] = {
    FindingKind.ZOMBIE: _(
        "Steady consumption in nearly every hour, with no day/night difference, looks like a forgotten job "
        "(a test, a load generator, a poller), not people: find its owner, switch it off or schedule it, and "
        "revoke its key if nobody claims it."
    ),
    FindingKind.DUPLICATE: _(
        "The same prompts were computed again for other users and conversations: cache the responses by prompt "
        "hash (a response cache in front of the model, with an expiry that fits the content), or deduplicate the "
        "requests where they are sent."
    ),
    FindingKind.LOOP: _(
        "Conversations sent the same prompt again and again (the agent re-plans or re-calls a tool in a loop): "
        "cap the steps per task, detect a repeated step and stop or escalate, and cache tool results within the "
        "conversation."
    ),
    FindingKind.MODEL_MISMATCH: _(
        "%(fitting)s of %(requests)s requests to %(large)s were short and simple: route such requests to "
        "%(small)s (a model router by task or size) and keep %(large)s for the hard ones."
    ),
    FindingKind.SYSTEM_PROMPT: _(
        "About %(per_request)s system tokens were sent with every request: shorten the system prompt, keep it "
        "byte-identical and first in the prompt so the prefix cache serves it, and move rarely needed "
        "instructions into retrieval."
    ),
    FindingKind.CONTEXT_BLOAT: _(
        "Tool results and retrieved context take a growing share of the prompt: inject only the top-k most "
        "relevant chunks (rerank first), truncate or summarise tool output, and summarise turns older than the "
        "last 3-5 instead of resending them."
    ),
    FindingKind.RETRY_STORM: _(
        "Failed requests were retried in bursts and their tokens bought nothing: retry with exponential backoff "
        "and jitter, cap the attempts, and open a circuit breaker (degrade to a smaller model or a cached answer) "
        "when the downstream keeps failing."
    ),
    FindingKind.REASONING: _(
        "Requests here reasoned more than the rule's N times their answer: cap the reasoning budget (reasoning "
        "effort, max thinking tokens) for this feature, or send its easy requests to a model without reasoning. "
        "The saving shown is at most these tokens' cost."
    ),
}


class ModelDowngrade(models.Model):
    """A large model and the smaller one that serves its short requests as well: the model-
    mismatch finding prices requests of `large_model` within both limits at `small_model`."""

    large_model = models.CharField(max_length=200, unique=True, help_text="Served model name (any version).")
    small_model = models.CharField(max_length=200)
    max_prompt_tokens = models.PositiveIntegerField(default=1000, validators=[MinValueValidator(1)])
    max_completion_tokens = models.PositiveIntegerField(default=200, validators=[MinValueValidator(1)])
    enabled = models.BooleanField(default=True)
    note = models.CharField(max_length=300, blank=True)

    class Meta:
        verbose_name = _("model downgrade")
        verbose_name_plural = _("model downgrades")
        ordering = ["large_model"]
        constraints = [
            models.CheckConstraint(condition=~Q(large_model=models.F("small_model")), name="audits_downgrade_differs")
        ]

    def __str__(self) -> str:
        return f"{self.large_model} -> {self.small_model}"


class AuditReport(models.Model):
    """The audit of one month; a rerun replaces it (and its findings) as a whole."""

    month = models.DateField(unique=True)
    currency = models.CharField(max_length=3, blank=True, help_text="Of all money figures; empty when unpriced.")
    tokens = models.BigIntegerField(default=0, help_text="All tokens processed in the month.")
    savings_tokens = models.BigIntegerField(default=0)
    savings = models.DecimalField(max_digits=24, decimal_places=6, null=True, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    broadcast_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("audit report")
        verbose_name_plural = _("audit reports")
        ordering = ["-month"]
        constraints = [models.CheckConstraint(condition=Q(month__day=1), name="audits_report_month")]

    def __str__(self) -> str:
        return f"audit {self.month:%Y-%m}"


class AuditFinding(models.Model):
    """One thing to cut: tokens it concerns, what removing it saves, where to look, what to do.
    `counted` is false when another finding (a zombie of the same dims) already holds its savings."""

    report = models.ForeignKey(AuditReport, on_delete=models.CASCADE, related_name="findings")
    position = models.PositiveIntegerField()
    kind = models.CharField(max_length=16, choices=list(KIND_LABELS.items()))
    title = models.CharField(max_length=500)
    dims = models.JSONField(default=dict)
    model = models.CharField(max_length=200, blank=True)
    tokens = models.BigIntegerField(help_text="Tokens the finding concerns.")
    savings_tokens = models.BigIntegerField(help_text="Tokens acting on it would save.")
    savings = models.DecimalField(max_digits=24, decimal_places=6, null=True, blank=True)
    evidence = models.CharField(max_length=2000, help_text="Link to the filtered drill-down.")
    suggestion = models.TextField()
    figures = models.JSONField(default=dict)
    counted = models.BooleanField(default=True)

    class Meta:
        ordering = ["report", "position"]
        constraints = [models.UniqueConstraint(fields=["report", "position"], name="audits_finding_position")]

    def __str__(self) -> str:
        return self.title

    @property
    def dims_label(self) -> str:
        """The dims as keys (the CSV: what a filter or a script names)."""
        return ", ".join(f"{k}={v}" for k, v in sorted(self.dims.items())) or "(no dims)"

    @property
    def title_shown(self) -> str:
        """The stored title is English prose built by the finder; other languages get the kind's
        label and the dims it concerns, which say the same in fewer words (page and chat)."""
        if (get_language() or "en").startswith("en"):
            return self.title
        return _("%(kind)s: %(where)s") % {"kind": KIND_LABELS[self.kind], "where": self.dims_shown}

    @property
    def suggestion_shown(self) -> str:
        """The stored suggestion in English; in other languages the kind's, with this finding's figures."""
        figures = self.figures
        if self.kind == FindingKind.LEDGER_CHECK and {"ledger_kind", "period"} <= set(figures):
            return finding_text(
                kind=figures["ledger_kind"],
                business_line=self.dims.get("business_line", ""),
                period=parse_month(figures["period"]),
                figures=figures,
                message=self.suggestion,
            )
        text = SUGGESTIONS.get(self.kind)
        if text is None or (get_language() or "en").startswith("en"):
            return self.suggestion
        requests = int(figures.get("requests") or 0)
        return str(text) % {
            "fitting": f"{int(figures.get('fitting') or 0):,}",
            "requests": f"{requests:,}",
            "large": self.model,
            "small": figures.get("small_model", ""),
            "per_request": f"{int(figures.get('system') or 0) // max(requests, 1):,}",
        }

    @property
    def dims_shown(self) -> str:
        """The dims as a reader names them, in the active language (the report page, chat)."""
        return dims_text(self.dims)
