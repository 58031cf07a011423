"""The classifier a batch gets: the rule set active when it arrives, compiled for its source."""

from __future__ import annotations

import msgspec
import pytest

from apps.accounts.models import CollectorKey
from apps.classification.engine import OUTPUT
from apps.classification.models import Reason
from apps.classification.services import batch_classify
from apps.ingest.contract import RecordV1
from tests import factories
from tests.classification.helpers import ruleset_activated


def test_a_batch_is_classified_by_the_rule_set_active_now_compiled_for_its_source(db):
    a, b = factories.collector_key(name="vllm-a").key, factories.collector_key(name="vllm-b").key
    records = [msgspec.convert(factories.record(), RecordV1, strict=False)]
    before = batch_classify(source_id=a.pk, records=records)

    moved = ruleset_activated(moves=[('source == "vllm-a"', "output", "waste.from_a")])
    from_a = batch_classify(source_id=a.pk, records=records)
    from_b = batch_classify(source_id=b.pk, records=records)

    assert from_a.ruleset_id == from_b.ruleset_id == moved.pk != before.ruleset_id
    assert from_a.reasons[0][OUTPUT] == Reason.objects.get(name="waste.from_a").pk
    assert from_b.reasons == before.reasons != from_a.reasons

    plain = ruleset_activated()  # the moves of the active set, copied: the same answers, a new set
    again = batch_classify(source_id=a.pk, records=records)
    assert (again.ruleset_id, again.reasons) == (plain.pk, from_a.reasons)


def test_a_batch_of_an_unknown_source_is_refused(db):
    records = [msgspec.convert(factories.record(), RecordV1, strict=False)]

    with pytest.raises(CollectorKey.DoesNotExist):
        batch_classify(source_id=987_654, records=records)
