"""The one request pipeline every edge runs (wire/edge.py): who sends a request, who pays for it,
whether a hard budget refuses it, and its record. The vLLM middleware, the proxy and the OTLP
receiver are tested through it at their own seams (tests/serving, tests/collectors)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from wire import edge
from wire.attribution import Policy
from wire.budgets import BudgetGate
from wire.contract import RecordV1

MAP = """
[callers.search-app]
tokens = ["sk-search"]
dims = { business_line = "search", team = "web" }
"""
SPENT = {
    "id": 1, "business_line": "search", "team": "", "hard": True, "holds": True, "currency": "", "amount": None,
    "used_amount": "0.00", "tokens": 10, "used_tokens": 12, "resets_at": "2099-01-01T00:00:00+00:00",
}  # fmt: skip


@pytest.fixture
def policy(tmp_path: Path) -> Policy:
    path = tmp_path / "map.toml"
    path.write_text(MAP)
    return Policy(path, {"env": "prod"})


def exchange(**headers: str) -> edge.Exchange:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "metadata": {"feature": "ask"}}
    return edge.Exchange(record_id="r-1", arrival=1_764_000_000.0, endpoint="chat.completions", headers=headers,
                         body=body)  # fmt: skip


def test_the_door_names_the_caller_of_one_authorization_and_refuses_two(policy: Policy) -> None:
    door = edge.Door(policy)

    assert door.who(["Bearer sk-search"]).caller.name == "search-app"  # type: ignore[union-attr]
    assert door.who(["Bearer sk-unknown"]).caller is None and door.who([]).caller is None
    with pytest.raises(edge.Refused) as refused:
        door.who(["Bearer sk-search", "Bearer sk-unknown"])
    assert (refused.value.status, refused.value.code) == (400, "two_authorizations")


def test_admitting_decides_the_dims_of_the_exchange(policy: Policy) -> None:
    door = edge.Door(policy)
    seen = exchange(**{"x-costplatform-business-line": "ads"})

    decision, refusal = door.admit(seen, door.who(["Bearer sk-search"]))

    assert refusal is None
    assert decision.dims == {"env": "prod", "business_line": "search", "team": "web", "caller": "search-app",
                             "feature": "ask"}  # fmt: skip
    assert seen.dims == decision.dims | {"refused.business_line": "ads"}


def test_a_spent_hard_budget_refuses_the_callers_line_and_the_refused_record_keeps_no_prompt(policy: Policy) -> None:
    gate = BudgetGate(lambda: {"budgets": [SPENT]}, interval=60)
    assert gate.poll()
    door = edge.Door(policy, budgets=gate)
    seen = exchange()

    _, refusal = door.admit(seen, door.who(["Bearer sk-search"]))
    seen.refused()
    record = edge.exchange_record(seen, model="m", tokens={}, status="rejected", finish_reason=None,
                                  timing={"e2e": 1.0}, hash_key=b"k")  # fmt: skip

    assert refusal is not None and refusal.status == 429
    assert door.admit(exchange(), door.who([]))[1] is None  # the default caller is not search's
    assert seen.body == {"model": "m"} and "prompt_hash" not in record
    assert record["outcome"] == {"status": "rejected"} and record["dims"]["business_line"] == "search"


class Words:
    """A tokenizer of one token a word (the chat template joins the messages' contents)."""

    chat_template = None

    def __call__(self, text: str, **_: Any) -> dict[str, Any]:
        spans, start = [], None
        for i, c in enumerate(text + " "):
            if c.isspace() or c in '{}[]:,"':
                if start is not None:
                    spans.append((start, i))
                    start = None
                if not c.isspace():
                    spans.append((i, i + 1))
            elif start is None:
                start = i
        return {"input_ids": list(range(len(spans))), "offset_mapping": spans}


def test_the_record_of_an_exchange_adds_what_the_request_says_to_what_the_edge_counted(policy: Policy) -> None:
    door = edge.Door(policy)
    seen = exchange(**{"x-costplatform-attempt": "3", "x-costplatform-retry-of": "r-0"})
    seen.body |= {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
                  "response_format": {"type": "json_object"}}  # fmt: skip
    door.admit(seen, door.who([]))

    record = edge.exchange_record(
        seen, model="m", tokens={"prompt": 20, "completion": 9}, status="ok", finish_reason="stop",
        timing={"ttft": 5.4, "e2e": 12.6, "prefill": None}, text='{"a": "b c"}', tokenizer=Words(), hash_key=b"k",
        model_version="v1",
    )  # fmt: skip

    msgspec.convert(record, RecordV1, strict=False)  # the platform takes it
    assert record["tokens"] == {"prompt": 20, "completion": 9, "system": 2, "structural": 8}
    assert record["ts"] == "2025-11-24T16:00:00+00:00" and (record["attempt"], record["retry_of"]) == (3, "r-0")
    assert record["timing"] == {"ttft": 5, "e2e": 13} and record["model_version"] == "v1"
    assert len(record["prompt_hash"]) == 32 and record["dims"] == {"env": "prod", "feature": "ask"}
