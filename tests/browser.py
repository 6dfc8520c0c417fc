"""Shared pieces of the browser tests: Debian's Chromium, its flags, and small page helpers."""

import os
import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from intents import services
from tests.factories import PASSWORD

CHROMIUM = Path("/usr/bin/chromium")


def require_chromium(chromium: Path = CHROMIUM, environ=os.environ) -> None:
    """Skip a browser test where Chromium is missing, except in CI (.ci/run sets CI=true): there a
    missing browser fails the test, so a run cannot pass with every browser test skipped."""
    if chromium.exists():
        return
    if environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        pytest.fail(f"CI is set but {chromium} is missing: the browser tests cannot run")
    pytest.skip(f"{chromium} (Debian's chromium) is not installed")


# The fixture (tests/pages.py) calls require_chromium before the browser is launched.
BROWSER_MARKS = [pytest.mark.browser, pytest.mark.usefixtures("chromium_present")]
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def new_draft(shop, **overrides):
    fields = {
        "tenant": shop["tenant"],
        "mailbox": shop["mailbox"],
        "to": ["customer@example.com"],
        "subject": "Your refund",
        "text": "Hello,\n\nWe refunded your order today.\n\nBest regards",
        "actor_user": shop["admin"].user,
    }
    fields.update(overrides)
    return services.draft_create(**fields)


def shot(page, name: str) -> None:
    """A full-page screenshot ``name``.png in SCREENSHOT_DIR when it is set (to look at, or to
    refresh docs/screenshots); none in the suite's runs, where nobody looks at them and each
    full page is a PNG the browser encodes, a fraction of a second of CPU apiece."""
    if folder := os.environ.get("SCREENSHOT_DIR"):
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def sign_in(page, user):
    page.goto("/signin/")
    page.fill("input[name=username]", user.email)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/t/[\w-]+/$"))


def polled_until(page, selector: str, *, every_ms: int, timeout: float = 20.0) -> None:
    """Until ``selector`` is on the page, moving the page's clock (``page.clock.install()``
    before it loaded) on by ``every_ms`` at a time: each step runs the page's next poll at
    once instead of after its interval. What the polls wait for (a worker, a webhook) still
    happens in real time, so a step that finds nothing waits a moment before the next."""
    deadline = time.monotonic() + timeout
    while True:
        page.clock.fast_forward(every_ms)
        try:
            page.wait_for_selector(selector, timeout=400)
            return
        except PlaywrightTimeout:
            if time.monotonic() > deadline:
                raise
