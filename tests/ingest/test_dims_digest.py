"""A dim set is found by the digest of its dims: the digest must stay what databases hold."""

from __future__ import annotations

import hashlib
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from apps.ingest.services import dims_digest


def stored_digest(key: tuple[tuple[str, str], ...]) -> bytes:
    """The digest every dim set in a database was stored under: of json.dumps' compact form."""
    return hashlib.blake2b(json.dumps(key, separators=(",", ":")).encode(), digest_size=16).digest()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=12), st.text(max_size=24)), max_size=8).map(tuple))
def test_a_dims_key_digests_as_the_compact_json_databases_hold_it_by(key):
    assert dims_digest(key) == stored_digest(key)


ASCII = st.text(alphabet=st.characters(max_codepoint=127), max_size=24)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(ASCII, ASCII), max_size=8).map(tuple))
def test_an_ascii_dims_key_with_control_characters_quotes_and_del_digests_the_same(key):
    assert dims_digest(key) == stored_digest(key)


def test_the_digest_of_a_set_stored_before_is_unchanged():
    # Computed with json.dumps when this set's kind of digest was first stored.
    key = (("business_line", "搜索"), ("team", 'a "quoted" \\ name'), ("user", "u-1\n\x7f"))

    assert dims_digest(key).hex() == "e1a0906304dccfe0dbd24302e3b97418"
