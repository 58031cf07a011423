"""The health rules' threshold parameters move into the thresholds table (alerts 0006): a rule of
every line sets the defaults row, a rule of one line that line's row; the rule keeps the rest."""

from __future__ import annotations

import importlib
from decimal import Decimal

import pytest

from apps.alerts.models import Rule
from apps.classification.health import thresholds_for
from apps.classification.models import HealthThreshold
from tests.conftest import _migrated_apps

pytestmark = pytest.mark.django_db


def move() -> None:
    importlib.import_module("migrations.alerts.0006_health_thresholds_to_table").move(_migrated_apps(), None)


def test_it_moves_the_health_rules_thresholds_into_the_table() -> None:
    Rule.objects.create(name="health all", detector="health", params={"effective_min": 0.7, "min_tokens": 5})
    Rule.objects.create(name="health batch", detector="health", business_line="batch", params={"waste_max": 0.3})
    Rule.objects.create(
        name="health off", detector="health", business_line="legal", params={"waste_max": 0.9}, enabled=False
    )

    move()

    assert thresholds_for("").effective_min == Decimal("0.70") and thresholds_for("").waste_max == Decimal("0.15")
    batch = thresholds_for("batch")
    assert (batch.effective_min, batch.waste_max) == (Decimal("0.70"), Decimal("0.30"))  # over the defaults row
    assert HealthThreshold.objects.get(business_line="batch").note == "from alert rule 'health batch'"
    assert Rule.objects.get(name="health all").params == {"min_tokens": 5}
    assert Rule.objects.get(name="health batch").params == {}
    # a disabled rule judged nothing: left as it was, no row for its line
    assert Rule.objects.get(name="health off").params == {"waste_max": 0.9}
    assert not HealthThreshold.objects.filter(business_line="legal").exists()
