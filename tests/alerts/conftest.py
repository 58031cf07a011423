from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.alerts.receivers import Receiver


@pytest.fixture
def receiver(settings) -> Iterator[Receiver]:
    settings.ALERTS_OUTBOUND_ALLOW = ["127.0.0.1/32"]
    found = Receiver()
    yield found
    found.close()
