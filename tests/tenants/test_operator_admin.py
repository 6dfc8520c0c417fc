"""The operators' Django admin keeps the address rule the rest of the product relies on: every
address lower-cased, one account per address whatever its case."""

import pytest
from django.test import Client
from django.urls import reverse

from tenants.models import User
from tenants.tokens import token_create

pytestmark = pytest.mark.django_db

ADD = "/ops/admin/tenants/user/add/"


@pytest.fixture
def operator():
    user = User.objects.create_superuser("ops@countersign.test", "operator-pass-1")
    client = Client()
    client.force_login(user)
    return client


PASSWORD = "a-long-enough-passphrase-77"


def add(operator, email):
    return operator.post(
        ADD,
        {"email": email, "password1": PASSWORD, "password2": PASSWORD, "usable_password": "true"},
    )


def test_an_account_added_in_mixed_case_is_stored_lower_case_and_can_sign_in(operator):
    response = add(operator, "  Bob@Acme.TEST ")

    assert response.status_code == 302, response.content.decode()[:2000]
    assert list(User.objects.values_list("email", flat=True).filter(is_superuser=False)) == [
        "bob@acme.test"
    ]
    signed_in = Client().post(reverse("login"), {"username": "Bob@Acme.TEST", "password": PASSWORD})
    assert signed_in.status_code == 302


def test_the_same_address_in_another_case_is_a_form_error_not_a_second_account(operator):
    User.objects.create_user("bob@acme.test", "whatever-1")

    response = add(operator, "BOB@acme.test")

    assert response.status_code == 200
    assert "already exists" in response.content.decode()
    assert User.objects.filter(email__iexact="bob@acme.test").count() == 1


@pytest.mark.parametrize(
    "model", ["agenttoken", "auditevent", "invitation"], ids=["token", "audit", "invitation"]
)
def test_operators_cannot_add_tokens_audit_rows_or_invitations_here(operator, tenant_a, model):
    """An agent token added here had no secret (the second add was a 500), and an audit row added
    here would be a forgery: both go through their services."""
    page = operator.get(f"/ops/admin/tenants/{model}/add/")
    posted = operator.post(f"/ops/admin/tenants/{model}/add/", {"tenant": tenant_a.pk})

    assert (page.status_code, posted.status_code) == (403, 403)


def test_a_token_is_read_only_here(operator, tenant_a):
    token, _ = token_create(tenant=tenant_a, name="bot", scopes=["drafts:read"], actor=None)

    page = operator.get(f"/ops/admin/tenants/agenttoken/{token.pk}/change/")
    operator.post(
        f"/ops/admin/tenants/agenttoken/{token.pk}/change/",
        {"tenant": tenant_a.pk, "name": "renamed", "scopes": "drafts:read,drafts:write"},
    )

    token.refresh_from_db()
    assert page.status_code == 200
    assert (token.name, token.scopes) == ("bot", ["drafts:read"])
