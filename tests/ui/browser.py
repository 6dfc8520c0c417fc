"""Shared pieces of the browser tests: Debian's Chromium, its flags, and small page helpers."""

import re
from pathlib import Path

import pytest

from intents import services
from tests.factories import PASSWORD

CHROMIUM = Path("/usr/bin/chromium")
BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed"),
]
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


def sign_in(page, user):
    page.goto("/signin/")
    page.fill("input[name=username]", user.email)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/t/[\w-]+/$"))
