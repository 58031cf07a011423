"""`make screenshots`: the pages as a new user sees them on demo data, into docs/screenshots/.

    python -m devtools.screenshots [--out docs/screenshots] [--records 60000] [--no-load]

Loads `make demo-data`'s two months (last month closed through the close workflow, this one
so far) into the database of DATABASE_URL (or the embedded one), starts the web server on a
free loopback port, logs in through the login form as a finance user and as an admin in a
real browser (Debian's chromium, driven by Playwright; `make browser` installs it) and takes
each page in English and, where it has text, in Chinese (`-zh-hans` names). The browser tests
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
# (path, file name, what must be drawn first, both languages)
PAGES: tuple[tuple[str, str, str, bool], ...] = (
    ("/", "home", "main h1", True),
    ("/finance/?month={last}", "finance", "#table-spend", True),
    ("/finance/journal/?month={last}&account=6401.04", "finance-journal", "main table", False),
    ("/finance/close/{last}/", "finance-close-approved", "#checklist", True),
    ("/finance/close/{this}/", "finance-close", "#checklist", False),
    ("/finance/plans/{this}/", "finance-plans", "main form", True),
    ("/overview/?range=30d", "overview", "#tokens-by-class .main-svg", True),
    ("/waste/?range=30d", "waste-classes", "#breakdown", False),
    ("/waste/?range=30d&class=waste", "waste-reasons", "#breakdown", True),
    ("/audits/", "audits", "main h1", False),
    ("/budgets/?month={this}", "budgets", "#budgets", False),
    ("/prices/", "prices", "main h1", False),
    ("/rules/", "rules", "main h1", False),
)


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
    """A finance user and an admin for the pictures, each with a fresh password."""
    import django

    django.setup()
    from django.contrib.auth.models import Group, User

    found = {}
    for username, group in (("screens-finance", "finance"), ("screens-admin", "admin")):
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


def _shoot(browser: Any, url: str, username: str, password: str, out: Path, months: dict[str, str]) -> list[str]:
    taken = []
    for language in ("en-US", "zh-hans"):
        context = browser.new_context(viewport={"width": 1400, "height": 900}, locale=language)
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
            if language != "en-US" and not both:
                continue
            page.goto(url + path.format(**months))
            page.wait_for_selector(ready)
            shown = name if language == "en-US" else f"{name}-zh-hans"
            page.screenshot(path=str(out / f"{shown}.png"), full_page=True)
            taken.append(shown)
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
    people, months = _people(), _months()
    args.out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    with _web(_free_port()) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        taken = _shoot(browser, url, "screens-finance", people["screens-finance"], args.out, months)
        browser.close()
    print(f"{len(taken)} screenshots in {args.out}: {', '.join(taken)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
