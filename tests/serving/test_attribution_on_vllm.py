"""Attacks on attribution through the real vLLM server: a caller (known by its API key, see
ATTRIBUTION_MAP in conftest.py) tries to bill another line, to make a reconciliation record, to
join another line's prefix cache; and the operator edits the map while the server runs."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from serving.middleware import trusted_salt
from tests.processes import PlatformServer, VllmServer
from tests.serving.conftest import ADS_KEY, SEARCH_KEY

pytestmark = pytest.mark.slow

# About 370 tokens: two full 128-token prefix-cache blocks.
LONG_CONTEXT = " ".join(f"clause {i}: invoices are settled within {i % 7 + 2} days of delivery." for i in range(60))


def chat(server: VllmServer, key: str | None, body: dict[str, Any], **headers: str) -> httpx.Response:
    body = {"model": "tiny-llama", "max_tokens": 4, **body}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    response = httpx.post(f"{server.url}/v1/chat/completions", json=body, headers=headers, timeout=120)
    assert response.status_code == 200, response.text
    return response


def question(text: str = "who pays?") -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def cached(response: httpx.Response) -> int:
    return int(response.json()["usage"]["prompt_tokens_details"]["cached_tokens"])


def refused_on_metrics(server: VllmServer, dim: str) -> float:
    found = re.search(rf'^costplatform_serving_attribution_refused_total{{dim="{re.escape(dim)}"}} (\S+)$',
                      server.metrics(), re.M)  # fmt: skip
    return float(found.group(1)) if found else 0.0


def test_it_bills_a_caller_claiming_another_line_through_a_header_to_its_own_line(
    vllm_server: VllmServer, platform: PlatformServer
) -> None:
    run = uuid.uuid4().hex
    before = refused_on_metrics(vllm_server, "business_line")

    chat(vllm_server, SEARCH_KEY, question(), **{"X-Costplatform-Business-Line": "ads", "X-Costplatform-Run": run})

    (record,) = platform.wait_records(1, **{"dims.run": run})
    assert record["dims"]["business_line"] == "search" and record["dims"]["team"] == "search-web"
    assert record["dims"]["refused.business_line"] == "ads"
    assert refused_on_metrics(vllm_server, "business_line") == before + 1


def test_it_bills_a_caller_claiming_another_line_through_body_metadata_to_its_own_line(
    vllm_server: VllmServer, platform: PlatformServer
) -> None:
    run = uuid.uuid4().hex

    chat(vllm_server, SEARCH_KEY, question() | {"metadata": {"business_line": "ads", "team": "ads-web", "run": run}})

    (record,) = platform.wait_records(1, **{"dims.run": run})
    assert (record["dims"]["business_line"], record["dims"]["team"]) == ("search", "search-web")
    assert (record["dims"]["refused.business_line"], record["dims"]["refused.team"]) == ("ads", "ads-web")


def test_it_never_lets_a_caller_make_a_reconciliation_record(vllm_server: VllmServer, platform: PlatformServer) -> None:
    run = uuid.uuid4().hex

    forged = {"X-Costplatform-Costplatform.kind": "reconciliation", "X-Costplatform-Source": "vllm-1"}
    chat(vllm_server, SEARCH_KEY, question(), **forged, **{"X-Costplatform-Run": run})
    chat(vllm_server, None, question() | {"metadata": {"costplatform.kind": "reconciliation", "run": run}})

    records = platform.wait_records(2, **{"dims.run": run})
    assert len(records) == 2
    for record in records:
        assert "costplatform.kind" not in record["dims"] and "source" not in record["dims"]
        assert record["dims"]["refused.costplatform.kind"] == "reconciliation"


def victims_prefix(server: VllmServer) -> dict[str, Any]:
    """A long prompt the victim (ads-app, naming its own line too) has just sent twice: its
    prefix is in ads' cache."""
    body = {"messages": [{"role": "system", "content": f"{uuid.uuid4().hex} {LONG_CONTEXT}"},
                         {"role": "user", "content": "when?"}]}  # fmt: skip
    own_line = {"X-Costplatform-Business-Line": "ads"}
    chat(server, ADS_KEY, body, **own_line)
    assert cached(chat(server, ADS_KEY, body, **own_line)) >= 128  # the victim's own repeat hits its cache
    return body


@pytest.mark.parametrize("forgery", ["header", "metadata", "the victim's salt"])
def test_it_keeps_a_forged_line_out_of_the_victims_prefix_cache(vllm_server: VllmServer, forgery: str) -> None:
    body = victims_prefix(vllm_server)
    headers: dict[str, str] = {}
    if forgery == "header":
        headers["X-Costplatform-Business-Line"] = "ads"
    elif forgery == "metadata":
        body |= {"metadata": {"business_line": "ads"}}
    else:  # the salt ads' requests get, as a caller who learnt the server's hash key could send it
        key = (vllm_server.spool / "prompt-hash.key").read_bytes().strip()
        body |= {"cache_salt": trusted_salt(key, "ads", None)}

    attack = chat(vllm_server, SEARCH_KEY, body, **headers)

    assert cached(attack) == 0


def test_it_uses_an_edited_map_for_the_next_request_without_a_restart(
    vllm_server: VllmServer, platform: PlatformServer, attribution_map: Path
) -> None:
    run = uuid.uuid4().hex
    original = attribution_map.read_text()
    try:
        attribution_map.write_text(
            original + '\n[callers.labs-app]\ntokens = ["sk-labs"]\ndims = { business_line = "labs" }\n'
        )
        time.sleep(1.5)  # the server looks at the file at most once a second
        chat(vllm_server, "sk-labs", question(), **{"X-Costplatform-Run": run})
    finally:
        attribution_map.write_text(original)

    (record,) = platform.wait_records(1, **{"dims.run": run})
    assert record["dims"]["business_line"] == "labs"
