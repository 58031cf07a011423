from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.factories import record

T0 = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=30)


def at(hours: float) -> str:
    return (T0 + timedelta(hours=hours)).isoformat()


@pytest.fixture
def stored(collector):
    batch = [
        record(
            ts=at(i * 0.5),
            model="big" if i % 3 else "small",
            dims={"business_line": "support" if i % 2 else "search", "user": f"u{i}"},
            **{
                "outcome.status": "ok" if i % 4 else "error",
                "tokens.prompt": 100 + i,
                "tokens.completion": 10,
                "tokens.system": 20,
                "tokens.tool": 0,
                "tokens.prompt_cached": 50,
            },
        )
        for i in range(40)
    ]
    assert collector.send(batch).json()["accepted"] == 40
    return batch


def test_records_come_newest_first_across_pages_each_exactly_once(reader, stored):
    seen, cursor, pages = [], None, 0
    while True:
        url = f"/api/v1/records?from={at(-1)}&limit=7".replace("+", "%2B") + (f"&cursor={cursor}" if cursor else "")
        page = reader.get(url).json()
        seen += [r["record_id"] for r in page["results"]]
        pages += 1
        cursor = page["next"]
        if not cursor:
            break

    assert pages == 6
    assert seen == [r["record_id"] for r in reversed(stored)]


def test_records_far_apart_come_newest_first_across_pages(reader, collector):
    """Pages are found through windows doubling from an hour: rows
    minutes to weeks apart, and several at one instant, each come once and in order."""
    now = datetime.now(UTC)
    offsets = [0.1, 0.2, 0.2, 3, 5, 30, 30, 200, 400, 400, 700]  # hours ago
    batch = [record(ts=(now - timedelta(hours=h)).isoformat(), dims={"business_line": "far"}) for h in offsets]
    assert collector.send(batch).json()["accepted"] == len(batch)
    start = (now - timedelta(days=31)).isoformat().replace("+", "%2B")

    seen, cursor = [], None
    while True:
        url = f"/api/v1/records?from={start}&limit=2&dims.business_line=far" + (f"&cursor={cursor}" if cursor else "")
        page = reader.get(url).json()
        seen += [(r["ts"], r["record_id"]) for r in page["results"]]
        cursor = page["next"]
        if not cursor:
            break

    assert sorted(r for _, r in seen) == sorted(r["record_id"] for r in batch)
    assert [datetime.fromisoformat(ts) for ts, _ in seen] == sorted(
        (datetime.fromisoformat(r["ts"]) for r in batch), reverse=True
    )


def test_records_filter_by_model_status_and_any_dim(reader, stored):
    url = f"/api/v1/records?from={at(-1)}&model=small&status=error&dims.business_line=search".replace("+", "%2B")

    got = reader.get(url).json()["results"]

    expected = [
        r["record_id"]
        for r in stored
        if r["model"] == "small" and r["outcome"]["status"] == "error" and r["dims"]["business_line"] == "search"
    ]
    assert sorted(r["record_id"] for r in got) == sorted(expected)
    assert expected


def test_records_filter_by_time_range(reader, stored):
    url = f"/api/v1/records?from={at(2)}&to={at(4)}".replace("+", "%2B")

    got = reader.get(url).json()["results"]

    assert [r["record_id"] for r in got] == [r["record_id"] for r in reversed(stored[4:8])]


@pytest.mark.parametrize("query", ["status=fine", "limit=0", "limit=abc", "cursor=%%%", "from=tomorrow"])
def test_records_refuse_bad_queries(reader, query):
    response = reader.get(f"/api/v1/records?{query}")

    assert response.status_code == 400
    assert response.json()


def test_usage_sums_tokens_by_day_model_and_business_line(reader, stored):
    url = f"/api/v1/usage?from={at(-1)}&to={at(48)}&group_by=model,business_line&granularity=day"

    rows = reader.get(url.replace("+", "%2B")).json()["rows"]

    expected: dict[tuple, list[int]] = {}
    for r in stored:
        day = datetime.fromisoformat(r["ts"]).date().isoformat()
        key = (day, r["model"], r["dims"]["business_line"])
        totals = expected.setdefault(key, [0, 0])
        totals[0] += 1
        totals[1] += r["tokens"]["prompt"]
    got = {(row["period"][:10], row["model"], row["business_line"]): [row["records"], row["prompt"]] for row in rows}
    assert got == expected


def test_usage_by_hour_and_status(reader, stored):
    rows = reader.get(
        f"/api/v1/usage?from={at(0)}&to={at(1)}&group_by=status&granularity=hour".replace("+", "%2B")
    ).json()["rows"]

    assert {(row["period"], row["status"], row["records"]) for row in rows} == {
        (T0.isoformat().replace("+00:00", "Z"), "error", 1),
        (T0.isoformat().replace("+00:00", "Z"), "ok", 1),
    }


@pytest.mark.parametrize(
    "query",
    [
        "group_by=model",
        "from=2026-01-01&to=2026-02-01&group_by=user",
        "from=2026-01-01&to=2026-02-01&granularity=week",
        "from=2026-01-01&to=2026-02-01&group_by=model,model",
    ],
)
def test_usage_refuses_bad_queries(reader, query):
    response = reader.get(f"/api/v1/usage?{query}")

    assert response.status_code == 400


def test_reading_needs_a_login(client, db):
    for url in ("/api/v1/records", "/api/v1/usage?from=2026-01-01&to=2026-02-01", "/api/v1/rejections"):
        assert client.get(url).status_code in (401, 403)


def test_a_collector_key_cannot_read(collector):
    response = collector.client.get("/api/v1/records", HTTP_AUTHORIZATION=f"Bearer {collector.secret}")

    assert response.status_code == 403
