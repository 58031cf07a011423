"""The Parquet export for warehouses (manage.py export_parquet): the files hold what the database
holds, exact decimals and UTC instants, the accounting month's window, pages as row groups,
re-runs replace the month, a closed month gives the same bytes, and an S3 round trip through an
S3-compatible server (moto's) on loopback over real HTTP."""

from __future__ import annotations

import io
import socket
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import time_machine
from django.core.management import CommandError, call_command
from django.db.models import Sum
from moto.server import ThreadedMotoServer

from apps.currencies.rates import rate_set
from apps.ledger.models import JournalLine
from apps.ledger.services.accrual import month_accrue
from apps.ledger.services.periods import period_close
from apps.pricing.models import HourlyCost
from apps.pricing.services import hours_price
from tests import factories
from tests.factories import record

NOV, DEC = date(2026, 11, 1), date(2026, 12, 1)
NOW = datetime(2026, 12, 3, 4, tzinfo=UTC)
# November in Asia/Shanghai: 2026-10-31 16:00 UTC up to 2026-11-30 16:00 UTC.
NOV_START, NOV_END = datetime(2026, 10, 31, 16, tzinfo=UTC), datetime(2026, 11, 30, 16, tzinfo=UTC)
HUGE = Decimal("123456789012345.678901234567")  # 27 digits: no float holds it
TINY = Decimal("0.000000000001")
ROLLUPS = "rollups/month=2026-11/part-0.parquet"
JOURNAL = "journal/month=2026-11/part-0.parquet"


@pytest.fixture(autouse=True)
def shanghai(settings: Any) -> Iterator[None]:
    settings.ACCOUNTING_TZ = "Asia/Shanghai"
    with time_machine.travel(NOW, tick=False):
        yield


def _books() -> None:
    """Priced rows on both edges of November and inside it, in two currencies, then accrued."""
    edges = [
        datetime(2026, 10, 31, 15, tzinfo=UTC),  # 31 Oct 23:00 local: October
        NOV_START,  # 1 Nov 00:00 local
        datetime(2026, 11, 30, 15, tzinfo=UTC),  # 30 Nov 23:00 local
        NOV_END,  # 1 Dec 00:00 local: December
    ]
    for i, hour in enumerate(edges):
        factories.hourly_cost(hour=hour, cost=Decimal("1.50") + i, tokens=1000 + i)
    factories.hourly_cost(hour=datetime(2026, 11, 10, 3, tzinfo=UTC), cost=HUGE, tokens=7, dims={"team": "search"})
    factories.hourly_cost(
        hour=datetime(2026, 11, 10, 3, tzinfo=UTC), cost=TINY, tokens=1, reason="waste.truncated", component="output"
    )
    factories.hourly_cost(
        hour=datetime(2026, 11, 12, 8, tzinfo=UTC), cost="0.333333333333", tokens=333, currency="USD", model="m-usd"
    )
    rate_set(day=date(2026, 11, 12), currency="USD", rate="7.2", source="PBOC central parity")
    month_accrue(month=NOV)
    month_accrue(month=DEC)


def _export(to: str, month: str = "2026-11", *extra: str) -> str:
    out = io.StringIO()
    call_command("export_parquet", month, "--to", to, *extra, stdout=out)
    return out.getvalue()


def _sums(rows: list[dict[str, Any]], field: str) -> dict[str, Decimal]:
    totals: dict[str, Decimal] = defaultdict(Decimal)
    for row in rows:
        totals[row["currency"]] += row[field]
    return dict(totals)


@pytest.mark.django_db
def test_it_exports_the_months_rows_and_sums_as_the_database_has_them(tmp_path: Path) -> None:
    _books()
    printed = _export(str(tmp_path))

    rollups, journal = pq.read_table(tmp_path / ROLLUPS), pq.read_table(tmp_path / JOURNAL)
    priced = HourlyCost.objects.filter(hour__gte=NOV_START, hour__lt=NOV_END)
    rows = rollups.to_pylist()
    assert len(rows) == priced.count() == 5
    assert f"rollups: 5 rows in 1 row groups -> {tmp_path / ROLLUPS}" in printed
    assert sum(r["tokens"] for r in rows) == priced.aggregate(t=Sum("tokens"))["t"]
    by_db = {v["currency"]: v["c"] for v in priced.values("currency").annotate(c=Sum("cost"))}
    assert (
        _sums(rows, "cost")
        == by_db
        == {"CNY": Decimal("2.50") + Decimal("3.50") + HUGE + TINY, "USD": Decimal("0.333333333333")}
    )
    assert rollups.schema.field("cost").type == pa.decimal128(30, 12)
    assert rollups.schema.field("hour").type == pa.timestamp("us", tz="UTC")
    assert {r["cost"] for r in rows} >= {HUGE, TINY}
    big = next(r for r in rows if r["cost"] == HUGE)
    assert (big["dims"], big["business_line"], big["reason"], big["component"]) == (
        '{"team":"search"}',
        "",
        "effective.input",
        "uncached_prompt",
    )
    assert {r["hour"] for r in rows} == {
        NOV_START,
        datetime(2026, 11, 10, 3, tzinfo=UTC),
        datetime(2026, 11, 12, 8, tzinfo=UTC),
        datetime(2026, 11, 30, 15, tzinfo=UTC),
    }
    assert {(r["hour"], r["day"]) for r in rows if r["tokens"] in (1001, 1002)} == {
        (NOV_START, date(2026, 11, 1)),
        (datetime(2026, 11, 30, 15, tzinfo=UTC), date(2026, 11, 30)),
    }
    assert rollups.schema.metadata[b"costplatform.window_start"] == b"2026-10-31T16:00:00+00:00"

    lines = journal.to_pylist()
    posted = JournalLine.objects.filter(period_id=NOV)
    assert len(lines) == posted.count() > 0
    assert journal.schema.field("debit").type == pa.decimal128(20, 2)
    assert _sums(lines, "debit") == _sums(lines, "credit")
    db_debits = {v["currency"]: v["d"] for v in posted.values("currency").annotate(d=Sum("debit"))}
    assert _sums(lines, "debit") == db_debits
    assert set(db_debits) == {"CNY"}  # the functional currency; the USD line keeps its original
    (usd,) = [ln for ln in lines if ln["original_currency"] == "USD" and ln["account_kind"] == "expense"]
    assert (usd["original_amount"], usd["rate"], usd["debit"]) == (
        Decimal("0.333333333333"),
        Decimal("7.2"),
        Decimal("2.40"),
    )
    expense = [ln for ln in lines if ln["account_kind"] == "expense"]
    assert sum(ln["tokens"] for ln in expense) == 1001 + 1002 + 7 + 1 + 333
    assert {ln["period"] for ln in lines} == {NOV}
    assert all(ln["account_code"] and ln["account_name"] and ln["entry_kind"] == "accrual" for ln in lines)
    assert {ln["model"] for ln in expense} == {"qwen2.5-7b-instruct", "m-usd"}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("ts", "month"),
    [("2026-11-30T23:30:00+08:00", "2026-11"), ("2026-12-01T00:30:00+08:00", "2026-12")],
)
def test_it_puts_a_record_in_the_accounting_month_of_shanghai(
    collector: Any, tmp_path: Path, ts: str, month: str
) -> None:
    assert collector.send([record(ts=ts, tokens={"prompt": 1000, "completion": 100})]).json()["accepted"] == 1
    factories.price_version(effective_from=datetime(2026, 1, 1, tzinfo=UTC), prices={"qwen*": ("1", "0.1", "4")})
    hours_price(start=datetime(2026, 11, 30, tzinfo=UTC), end=datetime(2026, 12, 1, tzinfo=UTC))
    month_accrue(month=NOV)
    month_accrue(month=DEC)

    counts = {}
    for name in ("2026-11", "2026-12"):
        _export(str(tmp_path), name)
        rollups = pq.read_table(tmp_path / f"rollups/month={name}/part-0.parquet").to_pylist()
        journal = pq.read_table(tmp_path / f"journal/month={name}/part-0.parquet").to_pylist()
        counts[name] = (
            sum(r["tokens"] for r in rollups),
            sum(ln["tokens"] for ln in journal if ln["account_kind"] == "expense"),
        )
    other = "2026-12" if month == "2026-11" else "2026-11"
    assert counts == {month: (1100, 1100), other: (0, 0)}


@pytest.mark.django_db
def test_it_writes_a_row_group_per_page_with_the_same_rows(tmp_path: Path) -> None:
    _books()
    _export(str(tmp_path / "whole"))
    printed = _export(str(tmp_path / "paged"), "2026-11", "--batch-rows", "2")

    whole, paged = (pq.ParquetFile(tmp_path / d / ROLLUPS) for d in ("whole", "paged"))
    assert (whole.num_row_groups, paged.num_row_groups) == (1, 3)
    assert paged.read().to_pylist() == whole.read().to_pylist()
    lines = JournalLine.objects.filter(period_id=NOV).count()
    assert pq.ParquetFile(tmp_path / "paged" / JOURNAL).num_row_groups == -(-lines // 2)
    assert pq.read_table(tmp_path / "paged" / JOURNAL).equals(pq.read_table(tmp_path / "whole" / JOURNAL))
    assert "rollups: 5 rows in 3 row groups" in printed


@pytest.mark.django_db
def test_it_replaces_the_months_files_and_a_closed_month_exports_the_same_bytes(tmp_path: Path) -> None:
    _books()
    stale = tmp_path / "rollups/month=2026-11/part-9.parquet"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"an older export")
    october = tmp_path / "rollups/month=2026-10/part-0.parquet"
    october.parent.mkdir(parents=True)
    october.write_bytes(b"another month")

    _export(str(tmp_path))
    assert sorted(p.name for p in stale.parent.iterdir()) == ["part-0.parquet"]
    assert october.read_bytes() == b"another month"
    factories.hourly_cost(hour=datetime(2026, 11, 20, tzinfo=UTC), cost="2.00", tokens=50)
    _export(str(tmp_path))
    assert pq.read_table(tmp_path / ROLLUPS).num_rows == 6

    period_close(month=NOV)
    _export(str(tmp_path))
    first = ((tmp_path / ROLLUPS).read_bytes(), (tmp_path / JOURNAL).read_bytes())
    _export(str(tmp_path))
    assert ((tmp_path / ROLLUPS).read_bytes(), (tmp_path / JOURNAL).read_bytes()) == first
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no scratch left behind


@pytest.mark.django_db
@pytest.mark.parametrize("configured", [True, False])
def test_it_exports_a_month_once_it_is_closed_where_configured(
    settings: Any, tmp_path: Path, django_capture_on_commit_callbacks: Any, configured: bool
) -> None:
    from costplatform.celery import app

    _books()
    settings.WAREHOUSE_EXPORT_TO = str(tmp_path) if configured else ""
    eager, app.conf.task_always_eager = app.conf.task_always_eager, True  # the task runs here, not in a worker
    try:
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            period_close(month=NOV)
    finally:
        app.conf.task_always_eager = eager

    assert len(callbacks) == int(configured)
    if configured:
        assert pq.read_table(tmp_path / JOURNAL).num_rows == JournalLine.objects.filter(period_id=NOV).count() > 0
        assert pq.read_table(tmp_path / ROLLUPS).num_rows == 5
    else:
        assert list(tmp_path.iterdir()) == []


# --- S3 ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    """An S3-compatible server on loopback: real HTTP, its own port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def s3(moto_endpoint: str, settings: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "test-key",
        "AWS_SECRET_ACCESS_KEY": "test-secret",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    settings.WAREHOUSE_S3_ENDPOINT_URL = moto_endpoint
    client = boto3.client("s3", endpoint_url=moto_endpoint)
    for bucket in client.list_buckets().get("Buckets", []):  # a bucket per test
        keys = [{"Key": o["Key"]} for o in client.list_objects_v2(Bucket=bucket["Name"]).get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=bucket["Name"], Delete={"Objects": keys})
        client.delete_bucket(Bucket=bucket["Name"])
    client.create_bucket(Bucket="warehouse")
    return client


def _objects(client: Any) -> dict[str, bytes]:
    listed = client.list_objects_v2(Bucket="warehouse").get("Contents", [])
    return {o["Key"]: client.get_object(Bucket="warehouse", Key=o["Key"])["Body"].read() for o in listed}


# Committing (transactional): the export then reads in its own repeatable-read snapshot.
def test_it_round_trips_through_an_s3_compatible_server(truncate_records: None, s3: Any, tmp_path: Path) -> None:
    _books()
    client = s3
    client.put_object(Bucket="warehouse", Key=f"books/costs/{ROLLUPS.replace('part-0', 'part-1')}", Body=b"stale")
    client.put_object(Bucket="warehouse", Key="books/costs/journal/month=2026-10/part-0.parquet", Body=b"october")

    printed = _export("s3://warehouse/books/costs/")
    _export(str(tmp_path))

    objects = _objects(client)
    assert sorted(objects) == [
        "books/costs/journal/month=2026-10/part-0.parquet",
        f"books/costs/{JOURNAL}",
        f"books/costs/{ROLLUPS}",
    ]
    assert f"-> s3://warehouse/books/costs/{ROLLUPS}" in printed
    for key in (ROLLUPS, JOURNAL):
        table = pq.read_table(pa.BufferReader(objects[f"books/costs/{key}"]))
        assert table.equals(pq.read_table(tmp_path / key))
        assert objects[f"books/costs/{key}"] == (tmp_path / key).read_bytes()
    rows = pq.read_table(pa.BufferReader(objects[f"books/costs/{ROLLUPS}"])).to_pylist()
    assert _sums(rows, "cost")["CNY"] == Decimal("2.50") + Decimal("3.50") + HUGE + TINY

    factories.hourly_cost(hour=datetime(2026, 11, 20, tzinfo=UTC), cost="2.00", tokens=50)
    _export("s3://warehouse/books/costs")
    again = _objects(client)
    assert sorted(again) == sorted(objects)
    assert pq.read_table(pa.BufferReader(again[f"books/costs/{ROLLUPS}"])).num_rows == 6


@pytest.mark.django_db
def test_it_names_a_missing_bucket(s3: Any) -> None:
    with pytest.raises(CommandError, match="s3://no-such-bucket: 404"):
        _export("s3://no-such-bucket/x")
    assert _objects(s3) == {}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("to", "month", "message"),
    [
        ("ftp://host/dir", "2026-11", "is not a destination"),
        ("s3://", "2026-11", "is not a destination"),
        ("", "2026-11", "is not a destination"),
        ("{file}", "2026-11", "cannot hold the export"),
        ("{file}/below", "2026-11", "cannot hold the export"),
        ("{dir}", "2026-13", "is not a month"),
    ],
)
def test_it_refuses_a_bad_destination_or_month(tmp_path: Path, to: str, month: str, message: str) -> None:
    (tmp_path / "a-file").write_text("kept")
    to = to.format(file=tmp_path / "a-file", dir=tmp_path / "out")
    with pytest.raises(CommandError, match=message):
        _export(to, month)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
    assert (tmp_path / "a-file").read_text() == "kept"
