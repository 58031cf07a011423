"""The attribution policy (serving/attribution.py): who pays is the operator's map, not the caller."""

from __future__ import annotations

import hashlib
import logging
import os
import time
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from wire import attribution
from wire.attribution import EMPTY, MapError, MapFile, Policy, decide, parse

ADS_SHA256 = hashlib.sha256(b"sk-ads").hexdigest()
MAP = f"""
[policy]
business_line = "allowed"

[default]
dims = {{ business_line = "shared" }}

[callers.search-web]
tokens = ["sk-search"]
dims = {{ business_line = "search", team = "search-web" }}
allowed = {{ business_line = ["search", "search-labs"] }}

[callers.ads]
token_sha256 = ["{ADS_SHA256}"]
dims = {{ business_line = "ads" }}
"""


def refused(dim: str) -> float:
    return REGISTRY.get_sample_value("costplatform_serving_attribution_refused_total", {"dim": dim}) or 0.0


def test_it_keeps_business_line_and_team_the_operators_when_there_is_no_map() -> None:
    before = refused("business_line")

    decision = decide(
        {"business_line": "payments", "team": "risk", "feature": "faq"},
        amap=EMPTY,
        caller=None,
        defaults={"business_line": "search", "env": "prod"},
    )

    assert decision.dims == {"business_line": "search", "env": "prod", "feature": "faq"}
    assert decision.refused == {"business_line": "payments", "team": "risk"}
    assert decision.record_dims()["refused.business_line"] == "payments"
    assert refused("business_line") == before + 1


def test_it_lets_a_caller_claim_only_within_its_allowed_set() -> None:
    amap = parse(MAP)
    search = amap.caller("sk-search")

    mine = decide({"business_line": "search-labs"}, amap=amap, caller=search, defaults={})
    theirs = decide({"business_line": "ads", "team": "ads-team"}, amap=amap, caller=search, defaults={})

    assert mine.dims == {"business_line": "search-labs", "team": "search-web", "caller": "search-web"}
    assert mine.refused == {}
    assert theirs.dims == {"business_line": "search", "team": "search-web", "caller": "search-web"}
    assert theirs.refused == {"business_line": "ads", "team": "ads-team"}


def test_it_never_lets_a_caller_set_the_record_kind_or_the_source() -> None:
    amap = parse(MAP)

    decision = decide(
        {"costplatform.kind": "reconciliation", "source": "vllm-1", "refused.business_line": "x"},
        amap=amap,
        caller=amap.caller("sk-search"),
        defaults={},
    )

    assert "costplatform.kind" not in decision.dims and "source" not in decision.dims
    assert decision.refused == {"costplatform.kind": "reconciliation", "source": "vllm-1", "refused.business_line": "x"}


def test_it_names_the_caller_itself_and_refuses_a_claimed_caller() -> None:
    amap = parse(MAP)
    before = refused("caller")

    ads = decide({"caller": "search-web"}, amap=amap, caller=amap.caller("sk-ads"), defaults={"caller": "ops"})
    anonymous = decide({"caller": "ads"}, amap=amap, caller=None, defaults={"caller": "ops"})

    assert ads.dims == {"business_line": "ads", "caller": "ads"} and ads.caller == "ads"
    assert ads.record_dims()["refused.caller"] == "search-web"
    assert "caller" not in anonymous.dims and anonymous.record_dims()["refused.caller"] == "ads"
    assert refused("caller") == before + 2


def test_it_knows_a_caller_by_the_sha256_of_its_token_and_others_as_the_default() -> None:
    amap = parse(MAP)

    assert amap.caller("sk-ads").name == "ads"
    assert amap.caller("sk-unknown") is None and amap.caller(None) is None
    decision = decide({"business_line": "search"}, amap=amap, caller=None, defaults={})
    assert decision.dims == {"business_line": "shared"} and decision.refused == {"business_line": "search"}
    assert decide({}, amap=amap, caller=amap.caller("sk-ads"), defaults={}).dims["caller"] == "ads"


def test_it_reads_the_token_of_a_bearer_header_only() -> None:
    assert attribution.bearer("Bearer sk-1") == "sk-1"
    assert attribution.bearer("bearer  sk-1 ") == "sk-1"
    assert attribution.bearer("Basic c2stMQ==") is None
    assert attribution.bearer(None) is None and attribution.bearer("Bearer ") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[policy]\nbusiness_line = 'choose'", "not one of operator, allowed, free"),
        ("[policy]\n'costplatform.kind' = 'free'", "never the caller's"),
        ("[callers.a]\ndims = { business_line = 'x' }", "no tokens"),
        ("[callers.a]\ntokens = ['t']\n[callers.b]\ntokens = ['t']", "a token of 'a' too"),
        ("[callers.a]\ntoken_sha256 = ['abc']", "not a SHA-256"),
        ("[callers.a]\ntokens = ['t']\ndims = { source = 'x' }", "set by the platform"),
        ("[callers.a]\ntokens = ['t']\ndims = { caller = 'b' }", "set by the platform"),
        ("[policy]\ncaller = 'free'", "never the caller's"),
        ("[default]\ntokens = ['t']", "has no tokens"),
        ("[polcy]\nteam = 'free'", "unknown key(s) polcy"),
        ("[policy\n", "not TOML"),
    ],
)
def test_it_refuses_a_broken_map_with_its_reason(text: str, message: str) -> None:
    with pytest.raises(MapError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse(text)


def write(path: Path, text: str) -> None:
    """Replace the file and move its mtime on, as an editor saving a minute later would."""
    path.write_text(text)
    stamp = time.time() + 60
    os.utime(path, (stamp, stamp))


def test_it_reloads_the_map_when_the_file_changes_and_keeps_the_last_good_one_on_a_broken_edit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "attribution.toml"
    write(path, MAP)
    policy = Policy(path, {"env": "prod"}, interval=0)
    assert policy.decide({}, "Bearer sk-new").dims == {"env": "prod", "business_line": "shared"}

    write(path, MAP + '\n[callers.labs]\ntokens = ["sk-new"]\ndims = { business_line = "labs" }\n')
    assert policy.decide({}, "Bearer sk-new").dims == {"env": "prod", "business_line": "labs", "caller": "labs"}

    with caplog.at_level(logging.ERROR, logger="costplatform.attribution"):
        write(path, "[policy\n")
        assert policy.decide({}, "Bearer sk-new").dims == {"env": "prod", "business_line": "labs", "caller": "labs"}
    assert "not reloaded" in caplog.text


def test_it_looks_at_the_file_at_most_once_an_interval(tmp_path: Path) -> None:
    path = tmp_path / "attribution.toml"
    write(path, MAP)
    file = MapFile(path, interval=3600)

    write(path, "[default]\ndims = { business_line = 'other' }\n")

    assert file.current().default.dims == {"business_line": "shared"}
