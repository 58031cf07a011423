"""The fault suite's stage: a private PostgreSQL cluster, the platform under gunicorn on it,
collector keys, and the table of faults survived printed at the end of the run.

`make test` runs the short form (one repetition of each fault, a few thousand records);
`make faults` sets FAULTS_FULL=1: more records, several repetitions, each at another point."""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings

from devtools import templatedb
from tests.faults.harness import OUTCOMES, REPEATS, Outcome, Row, ops_start, ops_wait, outcome_table, platform_env
from tests.faults.postgres import PrivatePostgres
from tests.processes import PlatformServer

DATABASE = "faults"


@dataclass
class Key:
    name: str
    secret: str
    id: int


@dataclass
class Suite:
    pg: PrivatePostgres
    url: str
    env: dict[str, str]
    platform: PlatformServer
    workdir: Path
    keys: Iterator[Key] = field(default_factory=lambda: iter(()))

    def key(self) -> Key:
        return next(self.keys)

    def database(self, name: str) -> tuple[str, dict[str, str]]:
        """URL and process environment of another database of the cluster."""
        url = self.pg.url(name)
        return url, platform_env(url, self.env["CELERY_BROKER_URL"])


@pytest.fixture(scope="session")
def broker_url() -> str:
    url = os.environ.get("FAULTS_BROKER_URL") or settings.CELERY_BROKER_URL
    if not url.startswith("redis://"):
        pytest.fail("the fault suite needs a Redis broker: FAULTS_BROKER_URL or CELERY_BROKER_URL=redis://…")
    # Nothing left from an earlier run that was itself killed: the default queue and the unacknowledged.
    redis.Redis.from_url(url).delete("celery", "unacked", "unacked_index", "unacked_mutex")
    return url


@pytest.fixture(scope="session")
def suite(broker_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    workdir = tmp_path_factory.mktemp("faults")
    pg = PrivatePostgres().init()
    try:
        pg.execute("postgres", f'CREATE DATABASE "{DATABASE}"')
        url = pg.url(DATABASE)
        env = platform_env(url, broker_url)
        migrated = templatedb.manage_migrate(env)  # a private server: no template there to copy
        assert migrated.returncode == 0, migrated.stderr[-4000:]
        names = [f"faults-{n}" for n in range(8 + 6 * REPEATS)]
        setup = ops_start(env, "setup", "--keys", ",".join(names))  # while gunicorn starts
        platform = PlatformServer(workdir, database_url=url)
        platform.env.update(env)
        platform.start()
        keys = ops_wait(setup)
        try:
            yield Suite(pg, url, env, platform, workdir, iter(Key(n, keys[n]["secret"], keys[n]["id"]) for n in names))
        finally:
            platform.kill()  # every test has checked what it stored
    finally:
        pg.close()


PASSED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call":
        item.stash[PASSED] = report.passed
    return report


@pytest.fixture
def fault_row(request: pytest.FixtureRequest) -> Iterator[Row]:
    """Make a row of the table: `fault_row(fault, measure, unit=..., note=...)`. The row is in the
    table from then on; at teardown it is counted (if the test stopped before counting it) and
    marked survived only if the test passed."""
    made: list[Outcome] = []

    def row(fault: str, measure: Callable[[Outcome], None], **fields: Any) -> Outcome:
        outcome = Outcome(fault, measure_with=measure, **fields)
        OUTCOMES.append(outcome)
        made.append(outcome)
        return outcome

    yield row
    passed = request.node.stash.get(PASSED, False)
    for outcome in made:
        if not outcome.measured:
            try:
                outcome.measure()
            except Exception as exc:  # the table says why a row has no counts
                outcome.note = f"{outcome.note}; not counted: {exc}".lstrip("; ")
        outcome.survived = passed


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if OUTCOMES:
        terminalreporter.section("faults survived")
        for line in outcome_table():
            terminalreporter.write_line(line)
