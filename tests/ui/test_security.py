"""CSRF on htmx posts, and untrusted draft content rendered inert."""

import re
from html.parser import HTMLParser

import pytest
from django.test import Client
from django.urls import reverse

from intents.models import DraftVersion, SendIntent

pytestmark = pytest.mark.django_db

XSS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<svg/onload=alert(1)>",
    '"><a href="javascript:alert(1)">x</a>',
    '<div hx-get="/t/tenant-a/outbox/" hx-trigger="load">x</div>',
    '<button hx-post="/t/tenant-a/queue/approve/" hx-on:click="alert(1)">x</button>',
    "<iframe srcdoc='<script>alert(1)</script>'></iframe>",
]


def test_htmx_post_without_csrf_token_is_403(tenant_a, mailbox_a, make_draft, admin_a):
    draft = make_draft(mailbox_a)
    version = DraftVersion.objects.get(draft=draft)
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_a.user)
    page = client.get(reverse("draft", args=[tenant_a.slug, draft.pk]))
    data = {"version": 1, "content_hash": version.content_hash}
    url = reverse("draft_approve", args=[tenant_a.slug, draft.pk])
    refused = client.post(url, data, HTTP_HX_REQUEST="true")
    assert refused.status_code == 403
    assert not SendIntent.objects.exists()
    token = re.search(r'"X-CSRFToken": "([^"]+)"', page.content.decode())[1]
    accepted = client.post(url, data, HTTP_HX_REQUEST="true", HTTP_X_CSRFTOKEN=token)
    assert accepted.status_code == 204 and accepted["HX-Redirect"]
    assert SendIntent.objects.filter(draft=draft).count() == 1


class Collector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.scripts, self.handlers, self.hx, self.iframes = [], [], [], []
        self._disabled = 0

    def handle_starttag(self, tag, attrs):
        names = dict(attrs)
        if tag == "script":
            self.scripts.append(names)
        self.handlers += [n for n in names if n.startswith("on")]
        if "hx-disable" in names:
            self._disabled += 1
        if not self._disabled:
            self.hx += [(tag, n) for n in names if n.startswith("hx-")]
        if tag == "iframe":
            self.iframes.append(names)


def test_hostile_draft_content_renders_inert(tenant_a, mailbox_a, make_draft, admin_a, signed_in):
    payload = "\n".join(XSS)
    draft = make_draft(mailbox_a, subject="<script>alert('s')</script>", text=payload, html=payload)
    client = signed_in(admin_a.user)
    html = client.get(reverse("draft", args=[tenant_a.slug, draft.pk])).content.decode()
    parsed = Collector()
    parsed.feed(html)
    assert all(s.get("src", "").startswith("/static/") for s in parsed.scripts)
    assert parsed.handlers == []
    ours = {
        ("section", "hx-get"),
        ("section", "hx-trigger"),
        ("section", "hx-swap"),
        ("form", "hx-post"),
        ("form", "hx-target"),
        ("form", "hx-swap"),
        ("body", "hx-headers"),
        # The navigation's counts poller (base.html).
        ("span", "hx-get"),
        ("span", "hx-trigger"),
        ("span", "hx-swap"),
        # The presence heartbeat (review/templates/review/draft.html).
        ("div", "hx-post"),
        ("div", "hx-trigger"),
        ("div", "hx-swap"),
    }
    assert set(parsed.hx) <= ours
    (frame,) = parsed.iframes
    assert "sandbox" in frame and not frame["sandbox"]
    assert "srcdoc" not in frame and "allow-scripts" not in html
    # The HTML body is the frame's own document, under a policy that runs nothing of it; its
    # own frame tags are shown as text (review.views.bodies.frames_as_text).
    document = client.get(frame["src"])
    assert document.content.decode() == payload.replace("<iframe ", "&lt;iframe ")
    policy = document["Content-Security-Policy"]
    assert policy.startswith("sandbox;") and "script-src 'none'" in policy


def test_hostile_content_in_the_queue_is_escaped(
    tenant_a, mailbox_a, make_draft, admin_a, signed_in
):
    make_draft(mailbox_a, subject="<img src=x onerror=alert(1)>")
    html = (
        signed_in(admin_a.user).get(reverse("tenant_home", args=[tenant_a.slug])).content.decode()
    )
    parsed = Collector()
    parsed.feed(html)
    assert parsed.handlers == []
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


@pytest.mark.django_db
def test_a_not_found_or_not_allowed_page_offers_a_way_onward(
    tenant_a, tenant_b, mailbox_b, make_draft, admin_a, signed_in
):
    """Another tenant's draft is a 404 like a missing one, and the page links to the start page
    rather than leaving a dead end; so does a refusal."""
    other = make_draft(mailbox_b)
    client = signed_in(admin_a.user)

    missing = client.get(reverse("draft", args=[tenant_a.slug, other.pk]))
    refused = client.get(reverse("tenant_home", args=[tenant_b.slug]))

    home = reverse("home")
    assert missing.status_code == 404
    assert f'<a href="{home}" data-error-onward>' in missing.content.decode()
    assert refused.status_code in (403, 404)
    assert f'<a href="{home}" data-error-onward>' in refused.content.decode()
