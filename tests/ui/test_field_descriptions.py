"""Every refused field's refusal is its accessible description, on every form page.

Django renders a field of a bound form that has errors with ``aria-invalid="true"`` and
``aria-describedby="<id>_error"`` (with ``<id>_helptext`` first when the field has help text; a
group of checkboxes or radios leaves both to its fieldset). A page that gives neither id to an
element leaves a screen reader announcing an invalid field without saying why. Each case below
posts (or asks for) input that each listed field refuses, and the page must:

- give an element every id that an ``aria-describedby`` names;
- hold each refusal in the element with the field's ``_error`` id, which the field (or the
  fieldset around its choices) names.

Parsed from the HTML; tests/console/test_browser_invisible_names.py checks one such page in
Chromium, where the accessible description is computed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser

import pytest
from django import forms
from django.test.utils import ContextList
from django.urls import reverse

from tenants import invitations
from tests.pages import based_on
from tests.routed_client import RoutedClient

pytestmark = pytest.mark.django_db

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source"}
VOID |= {"track", "wbr", "param"}
CONTROLS = {"input", "select", "textarea"}
INVISIBLE_NAME = "Ana\u200bPérez"
UNKNOWN_PK = "999999999"


@dataclass
class Control:
    name: str
    invalid: bool
    described_by: list[str]
    fieldset_described_by: list[str]


class Page(HTMLParser):
    """The ids of a page with the text each element holds, every id an ``aria-describedby``
    names, and the form controls with their descriptions and their fieldset's."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.texts: dict[str, list[str]] = {}
        self.references: list[str] = []
        self.controls: list[Control] = []
        self._open: list[tuple[str, str | None, list[str]]] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        ids = (attributes.get("aria-describedby") or "").split()
        self.references.extend(ids)
        element_id = attributes.get("id")
        if element_id is not None:
            self.texts.setdefault(element_id, [])
        if tag in CONTROLS and attributes.get("type") != "hidden":
            fieldsets = [d for t, _id, d in self._open if t == "fieldset"]
            self.controls.append(
                Control(
                    name=attributes.get("name") or "",
                    invalid=attributes.get("aria-invalid") == "true",
                    described_by=ids,
                    fieldset_described_by=fieldsets[-1] if fieldsets else [],
                )
            )
        if tag not in VOID:
            self._open.append((tag, element_id, ids))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag):
        for at in range(len(self._open) - 1, -1, -1):
            if self._open[at][0] == tag:
                del self._open[at:]
                return

    def handle_data(self, data):
        for _tag, element_id, _ids in self._open:
            if element_id is not None:
                self.texts[element_id].append(data)

    def text_of(self, element_id: str) -> str:
        return " ".join("".join(self.texts.get(element_id, [])).split())


def refused_forms(response) -> list[forms.BaseForm]:
    contexts = response.context if isinstance(response.context, ContextList) else [response.context]
    found: dict[int, forms.BaseForm] = {}
    for context in contexts:
        for value in context.flatten().values():
            if isinstance(value, forms.BaseForm) and value.is_bound and value.errors:
                found[id(value)] = value
    return list(found.values())


def unexplained(response) -> tuple[set[str], list[str]]:
    """(the refused visible fields, what the page fails to say about them or about any
    ``aria-describedby``)."""
    page = Page()
    page.feed(response.content.decode())
    wrong = [f"no element has the id {ref!r}" for ref in page.references if ref not in page.texts]
    refused: set[str] = set()
    for form in refused_forms(response):
        for bound in form.visible_fields():
            if not bound.errors:
                continue
            refused.add(bound.name)
            error_id = f"{bound.auto_id}_error"
            said = page.text_of(error_id)
            wrong += [
                f"{bound.name}: {error_id!r} does not hold {error!r}"
                for error in bound.errors
                if " ".join(str(error).split()) not in said
            ]
            controls = [c for c in page.controls if c.name == bound.html_name]
            wrong += [f"{bound.name}: no control on the page"] * (not controls)
            wrong += [
                f"{bound.name}: a control is not described by {error_id!r}"
                for c in controls
                if error_id not in c.described_by + c.fieldset_described_by
            ]
            wrong += [
                f"{bound.name}: a control is not aria-invalid" for c in controls if not c.invalid
            ]
    return refused, wrong


# --- the pages ---


@pytest.fixture
def world(tenant_a, member_of, mailbox_a, make_draft, make_intent):
    admin = member_of(tenant_a, "admin")
    client = RoutedClient()
    client.force_login(admin.user, backend="django.contrib.auth.backends.ModelBackend")
    return {
        "tenant": tenant_a,
        "slug": tenant_a.slug,
        "admin": admin,
        "client": client,
        "mailbox": mailbox_a,
        "member": member_of(tenant_a, "approver"),
        "draft": make_draft(mailbox_a),
        "intent": make_intent(mailbox_a, state="needs_attention"),
    }


def _url(name: str, w, *args) -> str:
    return reverse(name, args=[w["slug"], *args])


def invite(w):
    return w["client"].post(
        _url("admin_members", w),
        {"email": "not-an-address", "role": "owner", "approve": "x", "mailboxes": [UNKNOWN_PK]},
    )


def invite_invisible_name(w):
    return w["client"].post(
        _url("admin_members", w),
        {"email": "ana@example.test", "full_name": INVISIBLE_NAME, "role": "approver"},
    )


def member_role(w):
    return w["client"].post(_url("admin_member_role", w, w["member"].pk), {"role": "owner"})


def member_rights(w):
    page = _url("admin_member", w, w["member"].pk)
    return w["client"].post(
        _url("admin_member_rights", w, w["member"].pk),
        {"mailboxes": [UNKNOWN_PK], "based_on": based_on(w["client"], page, "rights_form")},
    )


def policies(w):
    page = _url("admin_policies", w)
    return w["client"].post(
        page,
        {
            "review_deadline_hours": "0",
            "retention_days": "many",
            "send_hold_seconds": "301",
            "based_on": based_on(w["client"], page),
        },
    )


def own_domains(w):
    page = _url("admin_policies", w)
    return w["client"].post(
        _url("admin_own_domains", w),
        {"own_domains": "not a domain!", "based_on": based_on(w["client"], page, "domains_form")},
    )


def deadlines(w):
    page = _url("admin_policies", w)
    return w["client"].post(
        _url("admin_deadlines", w),
        {
            "sla_minutes": "0",
            "sla_warning_minutes": "soon",
            "escalate_to": UNKNOWN_PK,
            "escalate_to_role": "owner",
            "based_on": based_on(w["client"], page, "deadlines_form"),
        },
    )


def suppression(w):
    return w["client"].post(_url("admin_suppression_add", w), {"address": "nobody", "note": ""})


def sso(w):
    page = _url("admin_signin", w)
    return w["client"].post(
        _url("admin_sso_settings", w),
        {
            "issuer": "https://idp.example.com/?x=1",
            "client_id": "",
            "domains": "!!",
            "jit_role": "owner",
            "based_on": based_on(w["client"], page, "sso_form"),
        },
    )


def token(w):
    return w["client"].post(
        _url("token_new", w),
        {"name": "", "scopes": ["everything"], "mailboxes": [UNKNOWN_PK], "expires_in_days": "5"},
    )


def token_invisible_name(w):
    return w["client"].post(
        _url("token_new", w), {"name": "support-bot\u200b", "scopes": ["drafts:write"]}
    )


def agent_events(w):
    return w["client"].post(
        _url("agent_events_new", w), {"url": "", "event_types": ["nothing"], "mailbox": UNKNOWN_PK}
    )


def mailbox_create(w):
    return w["client"].post(_url("mailbox_create", w), {"username": "", "display_name": "n" * 121})


def mailbox_policy(w):
    page = _url("mailbox_detail", w, w["mailbox"].pk)
    return w["client"].post(
        _url("mailbox_policy", w, w["mailbox"].pk),
        {
            "display_name": "n" * 121,
            "policy_mode": "closed",
            "allowed_domains": "not a domain!",
            "allowed_addresses": "nobody",
            "based_on": based_on(w["client"], page),
        },
    )


def mailbox_assignment(w):
    page = _url("mailbox_detail", w, w["mailbox"].pk)
    return w["client"].post(
        _url("mailbox_assignment", w, w["mailbox"].pk),
        {"sla_minutes": "0", "based_on": based_on(w["client"], page, "assignment_form")},
    )


def audit(w):
    return w["client"].get(_url("admin_audit", w), {"since": "yesterday", "send": "0"})


def analytics(w):
    return w["client"].get(_url("admin_analytics", w), {"since": "yesterday"})


def queue(w):
    return w["client"].get(
        _url("tenant_home", w), {"mailbox": "x", "agent": "x", "age": "old", "sort": "x"}
    )


def edit(w):
    return w["client"].post(
        _url("draft_edit", w, w["draft"].pk), {"base_version": "1", "to": "", "subject": ""}
    )


def broadcast(w):
    return w["client"].post(
        _url("broadcast_new", w), {"mailbox": UNKNOWN_PK, "subject": "", "text": ""}
    )


def intent_page(w):
    """The resolve form refuses through a message after a redirect; its fields' help is named."""
    return w["client"].get(_url("outbox_intent", w, w["intent"].pk))


def sign_in(w):
    return RoutedClient().post(reverse("login"), {"username": "", "password": ""})


def password_change(w):
    return w["client"].post(
        reverse("password_change"),
        {"old_password": "wrong", "new_password1": "short", "new_password2": "other"},
    )


def preferences(w):
    return w["client"].post(
        reverse("preferences"), {"language": "xx", "time_zone": "Mars/Olympus_Mons"}
    )


def invitation(w):
    found, secret = invitations.invitation_create(
        tenant=w["tenant"], email="new@example.test", role="approver", actor=w["admin"].user
    )
    invitee = RoutedClient()
    invitee.get(reverse("invitation_open", args=[secret]))
    return invitee.post(
        reverse("invitation", args=[found.pk]),
        {"full_name": INVISIBLE_NAME, "new_password1": "short", "new_password2": "other"},
    )


CASES: list[tuple[Callable, set[str]]] = [
    (invite, {"email", "role", "approve", "mailboxes"}),
    (invite_invisible_name, {"full_name"}),
    (member_role, {"role"}),
    (member_rights, {"mailboxes"}),
    (policies, {"review_deadline_hours", "retention_days", "send_hold_seconds"}),
    (own_domains, {"own_domains"}),
    (deadlines, {"sla_minutes", "sla_warning_minutes", "escalate_to", "escalate_to_role"}),
    (suppression, {"address", "note"}),
    (sso, {"issuer", "client_id", "domains", "jit_role"}),
    (token, {"name", "scopes", "mailboxes", "expires_in_days"}),
    (token_invisible_name, {"name"}),
    (agent_events, {"url", "event_types", "mailbox"}),
    (mailbox_create, {"username", "display_name"}),
    (mailbox_policy, {"display_name", "policy_mode", "allowed_domains", "allowed_addresses"}),
    (mailbox_assignment, {"sla_minutes"}),
    (audit, {"since", "send"}),
    (analytics, {"since"}),
    (queue, {"mailbox", "agent", "age", "sort"}),
    (edit, {"to", "subject"}),
    (broadcast, {"mailbox", "subject", "text", "recipients"}),
    (intent_page, set()),
    (sign_in, {"username", "password"}),
    (password_change, {"old_password", "new_password2"}),
    (preferences, {"language", "time_zone"}),
    (invitation, {"full_name", "new_password2"}),
]


@pytest.mark.parametrize(("ask", "refused"), CASES, ids=[ask.__name__ for ask, _ in CASES])
def test_each_refusal_is_the_description_of_its_field(world, ask, refused):
    response = ask(world)

    assert unexplained(response) == (refused, [])
