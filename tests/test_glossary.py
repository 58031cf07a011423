"""One glossary (docs/glossary.md) for every Chinese string: an entry of the catalogue whose whole
English text is a term is translated with the term's word, and no Chinese string, in the
catalogue or in the alerts' own texts, uses a word the glossary avoids (Token for 词元)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROW = re.compile(r"^\| (?P<english>[^|]+?) \| (?P<chinese>[^|]+?) \| (?P<avoid>[^|]*?) ?\|$", re.M)


def catalogue() -> list[tuple[str, list[str]]]:
    """(msgid, [msgstr, ...]) of each entry of the Chinese catalogue, its strings joined."""
    entries: list[tuple[str, list[str]]] = []
    field, parts = "", {}  # type: ignore[var-annotated]
    lines = (ROOT / "locale/zh_Hans/LC_MESSAGES/django.po").read_text().splitlines()
    for line in [*lines, ""]:
        if line.startswith('"') and field:
            parts[field] += ast.literal_eval(line)
            continue
        if not line.strip() and "msgid" in parts:
            entries.append((parts["msgid"], [v for k, v in parts.items() if k.startswith("msgstr")]))
            parts, field = {}, ""
        elif head := re.match(r'^(msgctxt|msgid_plural|msgid|msgstr(?:\[\d+\])?) (".*")$', line):
            field = head[1]
            parts[field] = ast.literal_eval(head[2])
    return entries


def glossary() -> list[tuple[str, str, list[str]]]:
    text = (ROOT / "docs/glossary.md").read_text()
    rows = []
    for row in ROW.finditer(text):
        if row["english"] in ("English", "---"):
            continue
        english = row["english"].split(" (")[0]
        avoid = [word.strip() for word in row["avoid"].split(",") if word.strip()]
        rows.append((english, row["chinese"], avoid))
    return rows


def avoided(word: str) -> re.Pattern[str]:
    """The word on its own: not a part of a key (`tokens.prompt`) or of a longer word."""
    return re.compile(rf"(?<![\w.`]){re.escape(word)}(?![\w.`])")


def chinese_strings() -> list[tuple[str, str]]:
    """(where, text) of every Chinese string: the catalogue's, and the alerts' own lines."""
    found = [(msgid, text) for msgid, texts in catalogue() for text in texts]
    for number, line in enumerate((ROOT / "apps/alerts/messages.py").read_text().splitlines(), 1):
        if re.search(r"[\u4e00-\u9fff]", line):
            found.append((f"apps/alerts/messages.py:{number}", line))
    return found


def test_the_glossary_has_its_terms() -> None:
    terms = {english: chinese for english, chinese, _ in glossary()}
    assert terms["token"] == "词元" and terms["idle capacity"] == "闲置产能" and len(terms) >= 25


def test_no_chinese_string_uses_a_word_the_glossary_avoids() -> None:
    rules = [(word, chinese, avoided(word)) for _, chinese, avoid in glossary() for word in avoid]
    wrong = [
        f"{where!r}: {word!r} (say {chinese})"
        for where, text in chinese_strings()
        for word, chinese, pattern in rules
        if pattern.search(text)
    ]
    assert not wrong, "\n".join(wrong)


def test_an_entry_that_is_a_term_says_the_terms_word() -> None:
    terms = {english.lower(): chinese for english, chinese, _ in glossary()}
    checked = [(msgid, texts[0]) for msgid, texts in catalogue() if msgid.lower().rstrip("s") in terms and texts[0]]
    wrong = [
        f"{msgid!r}: {text!r} (say {terms[msgid.lower().rstrip('s')]})"
        for msgid, text in checked
        if terms[msgid.lower().rstrip("s")] not in text
    ]
    assert len(checked) >= 10 and not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    ("text", "found"), [("词元用量突增", False), ("Token 用量突增", True), ("必须 <= tokens.prompt", False)]
)
def test_the_check_tells_an_avoided_word_from_a_key(text: str, found: bool) -> None:
    assert bool(avoided("Token").search(text) or avoided("token").search(text)) is found
