"""Per collector key rate limits on ingest: 429 with Retry-After and a JSON error, nothing of a
refused request stored, per-key overrides, and the shipper delivering everything after 429s."""

from __future__ import annotations

import time

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client import CollectorRegistry

from apps.accounts.models import CollectorKey, RateBucket
from apps.ingest.models import Record, Rejection
from apps.ingest.ratelimit import RECORDS, REQUESTS, RateLimited, key_limit, rate_take
from tests.conftest import Collector
from tests.factories import DELETE, collector_key, record
from wire.shipper import Pipeline

pytestmark = pytest.mark.django_db


@pytest.fixture
def burst_one_second(settings) -> None:
    settings.INGEST_RATE_BURST_SECONDS = 1


def drain(key: CollectorKey, kind: str) -> None:
    RateBucket.objects.update_or_create(key=key, kind=kind, defaults={"tokens": 0, "at": timezone.now()})


def limited(**rates: int) -> tuple[Collector, CollectorKey]:
    made = collector_key()
    CollectorKey.objects.filter(pk=made.key.pk).update(**rates)
    return Collector(Client(), made.secret), CollectorKey.objects.get(pk=made.key.pk)


# Buckets refill with the database clock: the tests that need a refusal empty the bucket just
# before the request (an ingest into a new month can take a second on a busy machine).


@pytest.mark.usefixtures("burst_one_second")
def test_it_answers_429_with_retry_after_and_stores_nothing_over_the_request_rate():
    sender, key = limited(rate_requests=1)
    assert sender.send([record()]).status_code == 200
    drain(key, REQUESTS)

    refused = sender.send([record(), record(model=DELETE)])

    assert refused.status_code == 429
    assert refused["Content-Type"] == "application/json"
    assert int(refused["Retry-After"]) >= 1
    assert "1 requests per second" in refused.json()["detail"]
    assert Record.objects.filter(source=key).count() == 1
    assert not Rejection.objects.filter(source=key).exists()


@pytest.mark.usefixtures("burst_one_second")
def test_it_counts_records_and_refuses_a_batch_over_the_record_rate_whole():
    sender, key = limited(rate_records=10)
    assert sender.send([record() for _ in range(8)]).status_code == 200
    drain(key, RECORDS)

    refused = sender.send([record() for _ in range(4)] + [record(model=DELETE)])

    assert refused.status_code == 429
    assert "10 records per second" in refused.json()["detail"]
    assert Record.objects.filter(source=key).count() == 8
    assert not Rejection.objects.filter(source=key).exists()


@pytest.mark.usefixtures("burst_one_second")
def test_a_batch_larger_than_the_bucket_passes_when_it_is_full_and_the_next_waits():
    sender, key = limited(rate_records=2)
    assert sender.send([record() for _ in range(25)]).status_code == 200  # more than the bucket holds
    refused = sender.send([record()])
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) >= 4  # a debt of 23 records at 2/s
    assert Record.objects.filter(source=key).count() == 25


@pytest.mark.usefixtures("burst_one_second")
def test_the_bucket_refills_at_the_rate():
    _, key = limited(rate_records=20)
    rate_take(key=key, kind=RECORDS, cost=20)
    with pytest.raises(RateLimited) as refused:
        rate_take(key=key, kind=RECORDS, cost=20)
    assert refused.value.retry_after == 1
    time.sleep(1.05)
    rate_take(key=key, kind=RECORDS, cost=20)


def test_keys_without_an_override_get_the_default_and_zero_turns_it_off(settings):
    settings.INGEST_RATE_REQUESTS, settings.INGEST_RATE_BURST_SECONDS = 2, 1
    _, own = limited()
    assert key_limit(own, REQUESTS).rate == 2
    rate_take(key=own, kind=REQUESTS, cost=2)
    with pytest.raises(RateLimited):
        rate_take(key=own, kind=REQUESTS, cost=1)
    unlimited, _ = limited(rate_requests=0)
    assert {unlimited.send([record()]).status_code for _ in range(4)} == {200}


@pytest.mark.usefixtures("burst_one_second")
def test_keys_have_buckets_of_their_own():
    _, first = limited(rate_requests=1)
    _, second = limited(rate_requests=1)
    rate_take(key=first, kind=REQUESTS, cost=1)
    with pytest.raises(RateLimited):
        rate_take(key=first, kind=REQUESTS, cost=1)
    rate_take(key=second, kind=REQUESTS, cost=1)


@pytest.mark.usefixtures("burst_one_second")
def test_a_refused_take_takes_nothing():
    _, key = limited(rate_requests=2)
    rate_take(key=key, kind=REQUESTS, cost=2)
    for _ in range(3):
        with pytest.raises(RateLimited):
            rate_take(key=key, kind=REQUESTS, cost=1)
    time.sleep(0.55)  # one token back: the refusals above did not dig a debt
    rate_take(key=key, kind=REQUESTS, cost=1)


def test_the_override_is_editable_in_the_admin(admin_client):
    made = collector_key()
    page = admin_client.get(f"/admin/accounts/collectorkey/{made.key.pk}/change/")
    assert b'name="rate_records"' in page.content and b'name="rate_requests"' in page.content
    answer = admin_client.post(
        f"/admin/accounts/collectorkey/{made.key.pk}/change/",
        {"name": made.key.name, "rate_requests": "7", "rate_records": "", "backdate_days": "3"},
    )
    assert answer.status_code == 302, answer.content[:2000]
    made.key.refresh_from_db()
    assert (made.key.rate_requests, made.key.rate_records) == (7, None)


@pytest.mark.usefixtures("truncate_records")
def test_the_shipper_delivers_everything_through_429s(live_server, tmp_path, settings):
    settings.INGEST_RATE_BURST_SECONDS = 1
    made = collector_key()
    CollectorKey.objects.filter(pk=made.key.pk).update(rate_records=100)
    sent = [record() for _ in range(300)]
    registry = CollectorRegistry()
    fast = {"flush_interval": 0.05, "backoff_base": 0.05, "backoff_cap": 0.2, "timeout": 5.0}
    with Pipeline(tmp_path, url=live_server.url, key=made.secret, registry=registry, batch_size=50, **fast) as p:
        for item in sent:
            p.submit(item)
        assert p.flush(timeout=30)

    stored = list(Record.objects.filter(source=made.key).values_list("record_id", flat=True))
    assert sorted(stored) == sorted(r["record_id"] for r in sent)  # each once
    refusals = registry.get_sample_value("costplatform_shipper_failed_requests_total")
    assert refusals is not None and refusals >= 1  # it was held back by 429s on the way
