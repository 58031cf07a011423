"""`make screenshots`: the pages as a new user sees them on demo data, into docs/screenshots/.

    python -m devtools.screenshots [--out docs/screenshots] [--records 60000] [--no-load]

Loads `make demo-data`'s two months (last month closed through the close workflow, this one
so far) into the database of DATABASE_URL (or the embedded one), starts the web server on a
free loopback port, logs in through the login form as an admin (who reads every page, the
finance ones and the collectors too) in a real browser (Debian's chromium, driven by
Playwright; `make browser` installs it) and takes each page in English and, where it has text,
in Chinese (`-zh-hans` names); the channels page's preview of each channel kind is also taken
alone (`alert-card-<kind>`), and a few pages on a phone, 390 px wide (`-phone` names). The browser tests
take their own screenshots of test data (test-artifacts/); these are the populated ones the
README shows.
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("COSTPLATFORM_CHROMIUM", "/usr/bin/chromium")
# (path, file name, what must be drawn first, both languages). {record} and {conversation} are
# found in the demo data (_targets): a duplicate request and the agent conversation that loops most.
PAGES: tuple[tuple[str, str, str, bool], ...] = (
    ("/", "home", "main h1", True),
    ("/finance/?month={last}", "finance", "#table-spend", True),
    ("/finance/journal/?month={last}&account=6401.04", "finance-journal", "main table", False),
    ("/finance/close/{last}/", "finance-close-approved", "#checklist", True),
    ("/finance/close/{this}/", "finance-close", "#checklist", True),
    ("/finance/close/{this}/items/open_findings/", "finance-close-findings", "#items", True),
    ("/finance/plans/{this}/", "finance-plans", "main form", True),
    ("/overview/?range=30d", "overview", "#tokens-by-class .main-svg", True),
    ("/waste/?range=30d", "waste-classes", "#breakdown", True),
    ("/waste/?range=30d&class=waste", "waste-reasons", "#breakdown", True),
    ("/waste/?range=30d&group=feature", "waste-by-feature", "#grouped", True),
    ("/waste/duplicates/?range=30d", "waste-duplicates", "#duplicates", True),
    ("/waste/conversation/?range=30d&id={conversation}", "conversation", "#conversation", True),
    ("/waste/record/?{record}", "record", "#components", True),
    ("/alerts/", "alerts", "#alerts", True),
    ("/alerts/channels/", "alert-channels", "#previews", True),
    ("/audits/", "audits", "main h1", False),
    ("/audits/{last}/", "audit-report", "main h1", True),
    ("/budgets/?month={this}", "budgets", "#budgets", True),
    ("/rules/", "rules", "#builtin-chain", True),
    ("/prices/", "prices", "main h1", True),
    ("/collectors/", "collectors", "#keys", True),
)
# Pages also taken as their first screen alone (`<name>-screen`): the README's picture.
FIRST_SCREENS = ("overview",)
# Pages also taken on a phone (390 px wide, `<name>-phone`), in both languages: the whole page.
PHONE = ("home", "overview", "finance", "budgets", "alerts", "waste-classes", "finance-close")
PHONE_VIEWPORT = {"width": 390, "height": 844}
# Parts of a page shot alone: (page name, selector of the parts, attribute naming each one).
PARTS = (("alert-channels", "#previews .preview", "data-kind", "alert-card"),)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _manage(*args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, check=True)


@contextmanager
def _web(port: int) -> Iterator[str]:
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "gunicorn", "costplatform.wsgi:application", "--bind", f"127.0.0.1:{port}"]
    web = subprocess.Popen([*command, "--workers", "2", "--timeout", "120"], cwd=REPO)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/healthz", timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline or web.poll() is not None:
                    raise SystemExit("the web server did not answer /healthz") from None
                time.sleep(0.5)
        yield url
    finally:
        web.terminate()
        web.wait(timeout=30)


def _people() -> dict[str, str]:
    """An admin for the pictures, with a fresh password."""
    import django

    django.setup()
    from django.contrib.auth.models import Group, User

    found = {}
    for username, group in (("screens-admin", "admin"),):
        password = secrets.token_urlsafe(16)
        user, _ = User.objects.get_or_create(username=username)
        user.set_password(password)
        user.is_staff = user.is_superuser = group == "admin"
        user.save()
        user.groups.add(Group.objects.get(name=group))
        found[username] = password
    return found


def _months() -> dict[str, str]:
    from django.utils import timezone

    from apps.common.buckets import month_of, previous_month

    this = month_of(timezone.now())
    return {"this": f"{this:%Y-%m}", "last": f"{previous_month(this):%Y-%m}"}


def _targets() -> dict[str, str]:
    """A duplicate request of this month (the query of its record page) and the agent
    conversation of this month that repeats its prompts most."""
    from urllib.parse import urlencode

    from django.db import connection
    from django.utils import timezone

    from apps.common.buckets import month_of, month_start

    since = month_start(month_of(timezone.now()))
    with connection.cursor() as cursor:
        cursor.execute(_DUPLICATE_SQL, [since, since])
        duplicate = cursor.fetchone()
        cursor.execute(_LOOPING_SQL, [since])
        looping = cursor.fetchone()
    if duplicate is None or looping is None:
        raise SystemExit("the demo data holds no duplicate or no agent conversation this month: load it again")
    ts, source, key = duplicate
    return {"record": urlencode({"ts": ts.isoformat(), "source": source, "key": key}), "conversation": looping[0]}


_DUPLICATE_SQL = """
SELECT r.ts, r.source_id, r.record_key FROM ingest_record r
JOIN (SELECT prompt_hash, dims_id FROM ingest_record WHERE ts >= %s AND prompt_hash IS NOT NULL AND status = 0
      GROUP BY prompt_hash, dims_id HAVING count(*) > 1 ORDER BY max(ts) DESC LIMIT 1) AS twice
  ON twice.prompt_hash = r.prompt_hash AND twice.dims_id = r.dims_id
WHERE r.ts >= %s ORDER BY r.ts DESC LIMIT 1
"""
_LOOPING_SQL = """
SELECT d.dims ->> 'conversation_id' FROM ingest_record r JOIN ingest_dimset d ON d.id = r.dims_id
WHERE r.ts >= %s AND d.dims ->> 'feature' = 'agent'
GROUP BY 1 ORDER BY count(*) - count(DISTINCT r.prompt_hash) DESC, count(*) DESC, 1 LIMIT 1
"""


def _parts(page: Any, name: str, out: Path, suffix: str) -> list[str]:
    taken = []
    for shown, selector, attribute, prefix in PARTS:
        if shown != name:
            continue
        for part in page.locator(selector).all():
            file = f"{prefix}-{part.get_attribute(attribute)}{suffix}"
            part.screenshot(path=str(out / f"{file}.png"))
            taken.append(file)
    return taken


def _shoot(browser: Any, url: str, username: str, password: str, out: Path, months: dict[str, str]) -> list[str]:
    taken = []
    for language, phone in (("en-US", False), ("zh-hans", False), ("en-US", True), ("zh-hans", True)):
        viewport = PHONE_VIEWPORT if phone else {"width": 1400, "height": 900}
        context = browser.new_context(viewport=viewport, locale=language, is_mobile=phone, has_touch=phone)
        context.add_cookies([{"name": "django_language", "value": language.lower()[:2] if language == "en-US"
                              else "zh-hans", "url": url}])  # fmt: skip
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.goto(f"{url}/login/?next=/")
        page.fill("input[name=username]", username)
        page.fill("input[name=password]", password)
        page.click("main button[type=submit]")
        page.wait_for_url(f"{url}/")
        for path, name, ready, both in PAGES:
            if (language != "en-US" and not both) or (phone and name not in PHONE):
                continue
            page.goto(url + path.format(**months))
            page.wait_for_selector(ready)
            suffix = ("" if language == "en-US" else "-zh-hans") + ("-phone" if phone else "")
            page.screenshot(path=str(out / f"{name}{suffix}.png"), full_page=True)
            taken += [name + suffix, *([] if phone else _parts(page, name, out, suffix))]
            if name in FIRST_SCREENS and not phone:
                page.screenshot(path=str(out / f"{name}-screen{suffix}.png"))
                taken.append(f"{name}-screen{suffix}")
        context.close()
    return taken


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.screenshots", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots", help="where the PNGs go")
    parser.add_argument("--records", type=int, default=60_000, help="demo records per whole month (60000)")
    parser.add_argument("--no-load", action="store_true", help="use the data already loaded")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costplatform.settings")
    os.environ.setdefault("COSTPLATFORM_ACCOUNTING_TZ", "Asia/Shanghai")
    if not Path(CHROMIUM).exists():
        parser.error(f"{CHROMIUM} is missing: `make browser` installs the Debian chromium package")
    _manage("migrate", "--no-input", "-v0")
    if not args.no_load:
        _manage("demo_data", "--records", str(args.records))
    people, months = _people(), {**_months(), **_targets()}
    args.out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    with _web(_free_port()) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        taken = _shoot(browser, url, "screens-admin", people["screens-admin"], args.out, months)
        browser.close()
    print(f"{len(taken)} screenshots in {args.out}: {', '.join(taken)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
