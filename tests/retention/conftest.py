from __future__ import annotations

import importlib

import pytest


@pytest.fixture
def seeded(db: None) -> None:
    """The built-in reasons and the chart of accounts, which an earlier transactional test's flush
    may have removed (they are written by migrations)."""
    from django.apps import apps

    from apps.classification.models import Reason
    from apps.ledger.models import Account, ConfigVersion

    if not Reason.objects.exists():
        importlib.import_module("migrations.classification.0002_builtin_reasons_and_ruleset").seed(apps, None)
    if not Account.objects.exists():
        ConfigVersion.objects.get_or_create(id=1)
        importlib.import_module("migrations.ledger.0003_seed_chart").seed(apps, None)
