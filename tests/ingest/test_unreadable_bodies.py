"""A body that is not a batch (not JSON, not UTF-8, broken gzip) costs the key's rate limit
before anything of it is stored, and what is kept of it (the body-level dead letter) is capped."""

from __future__ import annotations

import gzip

import pytest
from django.test import Client

from apps.accounts.models import CollectorKey
from apps.ingest.models import Rejection
from apps.ingest.ratelimit import BODY_BYTES_PER_RECORD, body_cost
from apps.ingest.services import RAW_BODY_KEPT
from tests.conftest import Collector
from tests.factories import collector_key, record

pytestmark = pytest.mark.django_db

GARBAGE = b"\x00\x01 this is no JSON " * 400  # 7,600 bytes: charged as 14 records


@pytest.fixture
def burst_one_second(settings) -> None:
    settings.INGEST_RATE_BURST_SECONDS = 1


def limited(**rates: int) -> tuple[Collector, CollectorKey]:
    made = collector_key()
    CollectorKey.objects.filter(pk=made.key.pk).update(**rates)
    return Collector(Client(), made.secret), CollectorKey.objects.get(pk=made.key.pk)


def flood(send, times: int) -> list[int]:
    return [send().status_code for _ in range(times)]


def test_an_unreadable_body_costs_what_records_of_its_size_would() -> None:
    assert body_cost(0) == 1 and body_cost(10) == 1
    assert body_cost(len(GARBAGE)) == len(GARBAGE) // BODY_BYTES_PER_RECORD == 14
    assert body_cost(10 * 1024 * 1024) == 20_480


@pytest.mark.usefixtures("burst_one_second")
def test_it_refuses_a_flood_of_garbage_with_429_and_keeps_only_what_was_charged() -> None:
    # 10 records a second, ample requests: only charging the garbage to the records bucket
    # can stop it. The first body takes the full bucket; the ones after it wait for the debt.
    sender, key = limited(rate_records=10, rate_requests=1000)

    codes = flood(lambda: sender.post(GARBAGE), 5)

    assert codes[0] == 400 and 429 in codes
    assert Rejection.objects.filter(source=key).count() == codes.count(400)


@pytest.mark.usefixtures("burst_one_second")
def test_it_refuses_a_flood_of_broken_gzip_with_429() -> None:
    sender, key = limited(rate_records=10, rate_requests=1000)

    codes = flood(lambda: sender.post(GARBAGE, HTTP_CONTENT_ENCODING="gzip"), 5)

    assert codes[0] == 400 and 429 in codes
    kept = Rejection.objects.filter(source=key)
    assert kept.count() == codes.count(400)
    assert "gzip" in kept.first().errors["body"][0]


@pytest.mark.usefixtures("burst_one_second")
def test_the_garbage_uses_up_the_rate_that_records_would_have_had() -> None:
    sender, _ = limited(rate_records=10, rate_requests=1000)
    assert sender.post(GARBAGE).status_code == 400

    refused = sender.send([record()])

    assert refused.status_code == 429
    assert "10 records per second" in refused.json()["detail"]


def test_a_large_unreadable_body_is_kept_capped_with_its_size_in_the_error() -> None:
    sender, key = limited()
    body = b"[" + b"x" * (RAW_BODY_KEPT * 3)

    response = sender.post(body)

    assert response.status_code == 400
    kept = Rejection.objects.get(source=key)
    assert len(kept.raw) == RAW_BODY_KEPT and kept.raw == "[" + "x" * (RAW_BODY_KEPT - 1)
    assert kept.errors["body"][0].endswith(f"(body of {len(body)} bytes; its first {RAW_BODY_KEPT} are kept)")


def test_a_large_broken_gzip_body_is_kept_capped() -> None:
    sender, key = limited()
    body = gzip.compress(b'{"records": []}')[:-4] + b"\xff" * (RAW_BODY_KEPT * 2)

    assert sender.post(body, HTTP_CONTENT_ENCODING="gzip").status_code == 400

    kept = Rejection.objects.get(source=key)
    assert len(kept.raw) <= RAW_BODY_KEPT and str(len(body)) in kept.errors["body"][0]


def test_a_small_unreadable_body_is_kept_whole() -> None:
    sender, key = limited()

    assert sender.post(b'{"records": [1,').status_code == 400

    kept = Rejection.objects.get(source=key)
    assert kept.raw == '{"records": [1,' and "bytes" not in kept.errors["body"][0]


def test_a_body_of_many_empty_gzip_members_is_refused_at_once() -> None:
    """Issue 31, finding 7: each gzip member copied the rest of the body, so ~500,000 empty members
    took 121 s (a worker timeout); members are now walked in place and capped."""
    import time

    sender, _ = limited(rate_records=10**9)
    body = gzip.compress(b"") * 120_000  # 2.4 MB: 7 s before

    began = time.process_time()  # the work itself, not the shared machine's load
    answer = sender.post(body, HTTP_CONTENT_ENCODING="gzip")
    took = time.process_time() - began

    assert took < 1.0, f"{took:.1f} s of processor time"
    assert answer.status_code == 400 and "gzip members" in str(answer.json())
