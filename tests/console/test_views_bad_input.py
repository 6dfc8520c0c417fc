"""Hostile and malformed input in the admin forms and URLs: each is a clear 4xx that changes
nothing (a 500 or a row written from it would be the bug)."""

import pytest
from django.urls import reverse

from common import addresses
from mailboxes.models import Mailbox
from mailboxes.provisioning import MAX_ALLOWED_ENTRIES
from tenants.models import AgentToken, AuditEvent, Invitation, Membership, Tenant
from tests.factories import make_local_mailbox
from tests.pages import based_on
from tests.routed_client import RoutedClient

pytestmark = pytest.mark.django_db

HUGE_INT = "9" * 30
BIG_PK = "99999999999999999999"


@pytest.fixture
def admin(tenant_a, member_of):
    return member_of(tenant_a, "admin")


@pytest.fixture
def admin_client(admin):
    client = RoutedClient(raise_request_exception=False)
    client.force_login(admin.user, backend="django.contrib.auth.backends.ModelBackend")
    return client


def _state(tenant):
    return (
        list(
            Mailbox.objects.filter(tenant=tenant).values_list(
                "display_name", "policy_mode", "allowed_domains", "allowed_addresses", "status"
            )
        ),
        AgentToken.objects.filter(tenant=tenant).count(),
        Invitation.objects.filter(tenant=tenant).count(),
        list(Membership.objects.filter(tenant=tenant).values_list("role", "is_active")),
        Tenant.objects.filter(pk=tenant.pk)
        .values_list("review_deadline_hours", "retention_days", "send_hold_seconds", "own_domains")
        .get(),
        AuditEvent.objects.filter(tenant=tenant).count(),
    )


def _text_posts(client, tenant, mailbox, value) -> dict:
    policy = reverse("mailbox_policy", args=[tenant.slug, mailbox.pk])
    base = based_on(client, reverse("mailbox_detail", args=[tenant.slug, mailbox.pk]))
    members = reverse("admin_members", args=[tenant.slug])
    policies = reverse("admin_policies", args=[tenant.slug])
    return {
        "token name": client.post(
            reverse("token_new", args=[tenant.slug]), {"name": value, "scopes": ["drafts:write"]}
        ),
        "invite name": client.post(
            members, {"email": "new@example.test", "full_name": value, "role": "approver"}
        ),
        "display name": client.post(
            policy, {"policy_mode": "open", "display_name": value, "based_on": base}
        ),
        "allowed domain": client.post(
            policy,
            {"policy_mode": "restricted", "allowed_domains": value + ".com", "based_on": base},
        ),
        "own domains": client.post(
            reverse("admin_own_domains", args=[tenant.slug]),
            {"own_domains": value, "based_on": based_on(client, policies, "domains_form")},
        ),
        "mailbox username": client.post(
            reverse("mailbox_create", args=[tenant.slug]), {"username": value}
        ),
    }


@pytest.mark.parametrize(
    "value",
    # A lone surrogate cannot travel in a form post (the server decodes bytes with
    # replacement), so it is left out here.
    ["\x00", "a\x00b", "\u202eevil", "\x1b[31m", "x" * 200],
    ids=["nul", "nul-mid", "bidi", "escape", "huge"],
)
def test_text_fields_refuse_bad_characters(tenant_a, admin_client, value):
    mailbox = make_local_mailbox(tenant_a)
    before = _state(tenant_a)
    answers = {
        name: answer.status_code
        for name, answer in _text_posts(admin_client, tenant_a, mailbox, value).items()
    }
    assert all(400 <= code < 500 for code in answers.values()), answers
    assert _state(tenant_a) == before


@pytest.mark.parametrize("value", ["\x00", "a\x00b", "\u202eevil", "\x1b[31m"])
def test_address_fields_refuse_bad_characters(tenant_a, admin_client, value):
    """(A 200-character local part is a syntactically accepted address here: Django's
    validate_email has no 64-character limit, and the send path's stricter check refuses it as
    a recipient anyway.)"""
    mailbox = make_local_mailbox(tenant_a)
    base = based_on(admin_client, reverse("mailbox_detail", args=[tenant_a.slug, mailbox.pk]))
    before = _state(tenant_a)
    answers = {
        "invite email": admin_client.post(
            reverse("admin_members", args=[tenant_a.slug]),
            {"email": value + "@example.test", "role": "approver"},
        ).status_code,
        "allowed address": admin_client.post(
            reverse("mailbox_policy", args=[tenant_a.slug, mailbox.pk]),
            {"policy_mode": "restricted", "allowed_addresses": value + "@x.com", "based_on": base},
        ).status_code,
    }
    assert all(400 <= code < 500 for code in answers.values()), answers
    assert _state(tenant_a) == before


@pytest.mark.parametrize(
    "email",
    ["ana@exa\u202emple.test", "ana@exa\u200bmple.test", "ana@exa\u00admple.test"],
    ids=["right-to-left-override", "zero-width-space", "soft-hyphen"],
)
def test_an_invitation_address_with_an_unseen_character_in_its_domain_is_refused(
    tenant_a, admin_client, email
):
    """Found by an outside probe: Django's validate_email takes any character past U+00A0 in a
    domain, so the invitation was written, listed on the members page and in the audit log, and
    the account it made had that address as its name to every colleague (until they give
    one): with U+202E it turned the rest of the line backwards, with U+200B or a soft hyphen it
    read exactly as ana@example.test. No such domain can receive mail (IDNA refuses them)."""
    before = _state(tenant_a)
    answer = admin_client.post(
        reverse("admin_members", args=[tenant_a.slug]), {"email": email, "role": "approver"}
    )
    assert answer.status_code == 400
    assert "cannot be seen" in answer.content.decode()
    assert _state(tenant_a) == before


@pytest.mark.parametrize(
    ("field", "entry"),
    [("allowed_domains", "d{}.example"), ("allowed_addresses", "u{}@example.com")],
)
def test_an_allow_list_past_its_bound_is_refused_before_any_entry_is_checked(
    tenant_a, admin_client, field, entry
):
    """Each entry's check (common.addresses) costs some 60 us: 4.5 MB of distinct domains held
    the web worker for 10 s before the bound of MAX_ALLOWED_ENTRIES refused them. The entries
    checked are counted by the check's cache (a miss is a check made)."""
    mailbox = make_local_mailbox(tenant_a)
    base = based_on(admin_client, reverse("mailbox_detail", args=[tenant_a.slug, mailbox.pk]))
    before = _state(tenant_a)
    entries = "\n".join(entry.format(i) for i in range(MAX_ALLOWED_ENTRIES + 1))
    addresses._validated.cache_clear()

    answer = admin_client.post(
        reverse("mailbox_policy", args=[tenant_a.slug, mailbox.pk]),
        {"policy_mode": "restricted", field: entries, "based_on": base},
    )

    assert answer.status_code == 400
    assert f"At most {MAX_ALLOWED_ENTRIES} entries; this list has {MAX_ALLOWED_ENTRIES + 1}." in (
        answer.content.decode()
    )
    assert addresses._validated.cache_info().misses == 0
    assert _state(tenant_a) == before


@pytest.mark.parametrize("value", [HUGE_INT, "-" + HUGE_INT, "1e9", "NaN", "\x00", "0x10"])
def test_number_fields_refuse_bad_numbers(tenant_a, admin, admin_client, value):
    mailbox = make_local_mailbox(tenant_a)
    client = admin_client
    policies = reverse("admin_policies", args=[tenant_a.slug])
    rights_base = based_on(
        client, reverse("admin_member", args=[tenant_a.slug, admin.pk]), "rights_form"
    )
    before = _state(tenant_a)
    answers = {
        "policies": client.post(
            policies,
            {
                "review_deadline_hours": value,
                "retention_days": value,
                "send_hold_seconds": value,
                "based_on": based_on(client, policies),
            },
        ).status_code,
        "deadlines": client.post(
            reverse("admin_deadlines", args=[tenant_a.slug]),
            {
                "sla_minutes": value,
                "escalate_to": value,
                "based_on": based_on(client, policies, "deadlines_form"),
            },
        ).status_code,
        "assignment": client.post(
            reverse("mailbox_assignment", args=[tenant_a.slug, mailbox.pk]),
            {
                "sla_minutes": value,
                "based_on": based_on(
                    client,
                    reverse("mailbox_detail", args=[tenant_a.slug, mailbox.pk]),
                    "assignment_form",
                ),
            },
        ).status_code,
        "token expiry": client.post(
            reverse("token_new", args=[tenant_a.slug]),
            {"name": "t", "scopes": ["drafts:write"], "expires_in_days": value},
        ).status_code,
        "token mailbox": client.post(
            reverse("token_new", args=[tenant_a.slug]),
            {"name": "t", "scopes": ["drafts:write"], "mailboxes": [value]},
        ).status_code,
        "rights mailbox": client.post(
            reverse("admin_member_rights", args=[tenant_a.slug, admin.pk]),
            {"mailboxes": [value], "based_on": rights_base},
        ).status_code,
        "invite mailbox": client.post(
            reverse("admin_members", args=[tenant_a.slug]),
            {"email": "n@example.test", "role": "viewer", "approve": "some", "mailboxes": [value]},
        ).status_code,
    }
    assert all(400 <= code < 500 for code in answers.values()), answers
    assert _state(tenant_a) == before


def test_huge_ids_in_urls_are_404(tenant_a, admin_client):
    before = _state(tenant_a)
    posts = [
        ("admin_member_role", {"role": "viewer"}),
        ("admin_member_rights", {}),
        ("admin_member_away", {"away": "1"}),
        ("admin_member_deactivate", {}),
        ("admin_member_reactivate", {}),
        ("admin_member_two_factor_reset", {}),
        ("admin_invitation_revoke", {}),
        ("token_revoke", {}),
        ("mailbox_policy", {"policy_mode": "open"}),
        ("mailbox_status", {"status": "disabled"}),
        ("mailbox_assignment", {}),
        ("mailbox_retry", {}),
        ("admin_suppression_remove", {"reason": "r"}),
    ]
    answers = {
        name: admin_client.post(reverse(name, args=[tenant_a.slug, BIG_PK]), data).status_code
        for name, data in posts
    }
    for name in ("admin_member", "mailbox_detail"):
        answers[f"GET {name}"] = admin_client.get(
            reverse(name, args=[tenant_a.slug, BIG_PK])
        ).status_code
    assert set(answers.values()) == {404}, answers
    assert _state(tenant_a) == before


@pytest.mark.parametrize("value", ["", "provisioning", "ACTIVE", "\x00", "deleted"])
def test_mailbox_status_outside_enabled_or_disabled_changes_nothing(tenant_a, admin_client, value):
    mailbox = make_local_mailbox(tenant_a)
    answer = admin_client.post(
        reverse("mailbox_status", args=[tenant_a.slug, mailbox.pk]), {"status": value}
    )
    assert answer.status_code in (302, 400)
    assert Mailbox.objects.get(pk=mailbox.pk).status == "active"


def test_role_and_scope_values_outside_the_choices(tenant_a, member_of, admin_client):
    other = member_of(tenant_a, "viewer")
    before = _state(tenant_a)
    role = reverse("admin_member_role", args=[tenant_a.slug, other.pk])
    answers = [
        admin_client.post(role, {"role": "owner"}).status_code,
        admin_client.post(role, {"role": "ADMIN"}).status_code,
        admin_client.post(
            reverse("token_new", args=[tenant_a.slug]),
            {"name": "t", "scopes": ["drafts:approve"]},
        ).status_code,
        admin_client.post(
            reverse("admin_members", args=[tenant_a.slug]),
            {"email": "n@example.test", "role": "superuser"},
        ).status_code,
    ]
    assert all(400 <= c < 500 for c in answers), answers
    assert _state(tenant_a) == before
