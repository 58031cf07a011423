from __future__ import annotations

from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.utils.translation import gettext_lazy as _

from apps.accounts.models import CollectorKey
from wire.contract import TIMING_FIELDS as TIMING_FIELDS
from wire.contract import TOKEN_FIELDS as TOKEN_FIELDS


class Endpoint(models.IntegerChoices):
    CHAT_COMPLETIONS = 1, "chat.completions"
    COMPLETIONS = 2, "completions"
    RESPONSES = 3, "responses"
    EMBEDDINGS = 4, "embeddings"
    MESSAGES = 5, "messages"  # Anthropic's Messages API, through the proxy


class Status(models.IntegerChoices):
    OK = 0, "ok"
    ERROR = 1, "error"
    TIMEOUT = 2, "timeout"
    ABORTED = 3, "aborted"
    REJECTED = 4, "rejected"


class FinishReason(models.IntegerChoices):
    STOP = 1, "stop"
    LENGTH = 2, "length"
    TOOL_CALLS = 3, "tool_calls"
    ABORT = 4, "abort"
    ERROR = 5, "error"
    REPETITION = 6, "repetition"


class QualityTier(models.IntegerChoices):
    HIGH = 1, "high"
    MID = 2, "mid"
    LOW = 3, "low"


# The record's token kinds and timing fields are wire's (wire/contract.py, imported above and
# named here for the apps that read these columns): Record and HourlyUsage carry a column of each
# name, in the migrations' order (tests/test_one_record_contract.py holds them to it).


class ServedModel(models.Model):
    """A served model name and version; records hold its small id."""

    id = models.AutoField(primary_key=True)
    name = models.CharField(max_length=200)
    version = models.CharField(max_length=100, blank=True, default="")

    class Meta:
        verbose_name = _("served model")
        verbose_name_plural = _("served models")
        constraints = [models.UniqueConstraint(fields=["name", "version"], name="ingest_model_name_version")]

    def __str__(self) -> str:
        return f"{self.name}@{self.version}" if self.version else self.name


# References from rollup rows: see HourlyUsage.
ROLLUP_REF: dict = {"on_delete": models.DO_NOTHING, "db_constraint": False, "db_index": False}


class DimSet(models.Model):
    """A distinct set of attribution dims, stored once. `rollup` is the same set cut down to
    the dims kept in the hourly rollups (settings.ROLLUP_DIMS).

    About one record in ten brings a set never seen (per-user and per-conversation dims), so a
    new row costs ingest: the rollup reference has no foreign-key check (sets are never
    deleted; ingest writes a set's rollup part before the set) and no index, the business
    line's index is a plain one (nothing filters it with LIKE), and the dims' GIN index holds
    hashes of paths (jsonb_path_ops)."""

    id = models.AutoField(primary_key=True)
    digest = models.BinaryField(max_length=16, unique=True)
    dims = models.JSONField(default=dict)
    business_line = models.CharField(max_length=256, blank=True, default="")
    rollup = models.ForeignKey("self", null=True, related_name="+", **ROLLUP_REF)

    class Meta:
        verbose_name = _("dim set")
        verbose_name_plural = _("dim sets")
        indexes = [
            # jsonb_path_ops: containment (@>) is the only indexed question asked of dims, and
            # a new set makes one entry a dim instead of one a key and one a value.
            GinIndex(fields=["dims"], opclasses=["jsonb_path_ops"], name="ingest_dimset_dims_path_gin"),
            models.Index(fields=["business_line"], name="ingest_dimset_business_line"),
        ]

    def __str__(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in sorted(self.dims.items())) or "(no dims)"


class Record(models.Model):
    """One token record. The table is range-partitioned by month on ts (created in SQL)."""

    pk = models.CompositePrimaryKey("ts", "source_id", "record_key")
    ts = models.DateTimeField()
    record_key = models.BigIntegerField(help_text="64-bit hash of record_id, the compact unique key.")
    source = models.ForeignKey(CollectorKey, on_delete=models.DO_NOTHING, db_constraint=False)
    model = models.ForeignKey(ServedModel, on_delete=models.DO_NOTHING, db_constraint=False)
    dims = models.ForeignKey(DimSet, on_delete=models.DO_NOTHING, db_constraint=False)
    prompt = models.IntegerField()
    prompt_cached = models.IntegerField()
    completion = models.IntegerField()
    system = models.IntegerField()
    tool = models.IntegerField()
    structural = models.IntegerField()
    padding = models.IntegerField()
    draft = models.IntegerField()
    draft_accepted = models.IntegerField()
    recomputed = models.IntegerField()
    reasoning = models.IntegerField(default=0, db_default=0)
    prompt_cache_write = models.IntegerField(default=0, db_default=0)
    queued = models.IntegerField(null=True)
    ttft = models.IntegerField(null=True)
    prefill = models.IntegerField(null=True)
    decode = models.IntegerField(null=True)
    e2e = models.IntegerField(null=True)
    endpoint = models.SmallIntegerField(choices=Endpoint.choices, null=True)
    status = models.SmallIntegerField(choices=Status.choices)
    finish_reason = models.SmallIntegerField(choices=FinishReason.choices, null=True)
    quality_tier = models.SmallIntegerField(choices=QualityTier.choices, null=True)
    attempt = models.SmallIntegerField()
    record_id = models.TextField()
    retry_of = models.TextField(null=True)
    prompt_hash = models.BinaryField(null=True)

    class Meta:
        managed = False
        db_table = "ingest_record"


class HourlyUsage(models.Model):
    """Hourly rollup of records, maintained in the same transaction as the insert."""

    # Rollup rows are written by the hundred on every ingest: no foreign-key checks or
    # single-column indexes on them (the ids come from rows that are never deleted; the
    # unique key, which leads with the hour, serves the reads).
    hour = models.DateTimeField()
    source = models.ForeignKey(CollectorKey, related_name="+", **ROLLUP_REF)
    model = models.ForeignKey(ServedModel, related_name="+", **ROLLUP_REF)
    dims = models.ForeignKey(DimSet, related_name="+", **ROLLUP_REF)
    endpoint = models.SmallIntegerField(choices=Endpoint.choices, null=True)
    status = models.SmallIntegerField(choices=Status.choices)
    records = models.BigIntegerField(default=0)
    prompt = models.BigIntegerField(default=0)
    prompt_cached = models.BigIntegerField(default=0)
    completion = models.BigIntegerField(default=0)
    system = models.BigIntegerField(default=0)
    tool = models.BigIntegerField(default=0)
    structural = models.BigIntegerField(default=0)
    padding = models.BigIntegerField(default=0)
    draft = models.BigIntegerField(default=0)
    draft_accepted = models.BigIntegerField(default=0)
    recomputed = models.BigIntegerField(default=0)
    reasoning = models.BigIntegerField(default=0, db_default=0)
    prompt_cache_write = models.BigIntegerField(default=0, db_default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["hour", "source", "model", "dims", "endpoint", "status"],
                name="ingest_hourlyusage_key",
                nulls_distinct=False,
            )
        ]


class Rejection(models.Model):
    """A record (or a whole body) that was refused, kept as received with the reasons."""

    source = models.ForeignKey(CollectorKey, on_delete=models.PROTECT, related_name="rejections")
    received_at = models.DateTimeField(auto_now_add=True, db_index=True)
    index = models.IntegerField(null=True, help_text="Position in the batch; empty for a whole body.")
    record_id = models.TextField(blank=True, default="")
    raw = models.TextField()
    errors = models.JSONField()

    class Meta:
        verbose_name = _("rejection")
        verbose_name_plural = _("rejections")
        ordering = ["-id"]


class DroppedPartition(models.Model):
    """A month of raw records dropped by retention (its whole partition): what it held, when it
    went. Reads that need the records of such a month (reclassify, audits) refuse it."""

    month = models.DateField(unique=True)
    partition = models.CharField(max_length=63)
    records = models.BigIntegerField()
    dropped_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("dropped partition")
        verbose_name_plural = _("dropped partitions")
        ordering = ["month"]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} ({self.records} records, dropped {self.dropped_at:%Y-%m-%d})"
