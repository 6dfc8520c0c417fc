"""Names other people read, given with characters nobody sees (an outside probe of the admin
forms): an agent token named with only a zero-width space or a Hangul filler reads as a token
with no name, and 'support-bot' followed by a zero-width space as the 'support-bot' beside it,
on the token list, the queue and the draft page; an invited person's name is their name on every
page their colleagues read. The mailbox display name already refuses these characters
(mailboxes.provisioning); a token's name and a person's name now do too, naming them."""

import pytest
from django.urls import reverse

from tenants.models import AgentToken, Invitation
from tenants.tokens import token_create
from tests.routed_client import RoutedClient

pytestmark = pytest.mark.django_db

UNSEEN_NAMES = {
    "zero-width-space-only": "\u200b",
    "hangul-filler-only": "\u3164",
    "word-joiner-inside": "support\u2060-bot",
    "zero-width-space-after": "support-bot\u200b",
}


@pytest.fixture
def admin(tenant_a, member_of):
    return member_of(tenant_a, "admin")


@pytest.fixture
def admin_client(admin):
    client = RoutedClient(raise_request_exception=False)
    client.force_login(admin.user, backend="django.contrib.auth.backends.ModelBackend")
    return client


@pytest.mark.parametrize("name", UNSEEN_NAMES.values(), ids=UNSEEN_NAMES.keys())
def test_a_token_name_with_characters_nobody_sees_is_refused_naming_them(
    tenant_a, admin, admin_client, name
):
    token_create(tenant=tenant_a, name="support-bot", scopes=["drafts:write"], actor=admin.user)
    answer = admin_client.post(
        reverse("token_new", args=[tenant_a.slug]), {"name": name, "scopes": ["drafts:write"]}
    )
    assert answer.status_code == 422
    unseen = next(c for c in name if c in "\u200b\u3164\u2060")
    assert f"U+{ord(unseen):04X}" in answer.content.decode()
    assert list(AgentToken.objects.filter(tenant=tenant_a).values_list("name", flat=True)) == [
        "support-bot"
    ]


@pytest.mark.parametrize("name", UNSEEN_NAMES.values(), ids=UNSEEN_NAMES.keys())
def test_an_invited_persons_name_with_characters_nobody_sees_is_refused_naming_them(
    tenant_a, admin_client, name
):
    answer = admin_client.post(
        reverse("admin_members", args=[tenant_a.slug]),
        {"email": "new@example.test", "full_name": name, "role": "approver", "approve": "all"},
    )
    assert answer.status_code == 400
    unseen = next(c for c in name if c in "\u200b\u3164\u2060")
    assert f"U+{ord(unseen):04X}" in answer.content.decode()
    assert not Invitation.objects.filter(tenant=tenant_a).exists()


@pytest.mark.parametrize(
    "name",
    ["\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645", "bot \U0001f469\u200d\U0001f4bb"],
    ids=["persian-zero-width-non-joiner", "emoji-zero-width-joiner"],
)
def test_names_written_with_joiners_are_kept(tenant_a, admin_client, name):
    token = admin_client.post(
        reverse("token_new", args=[tenant_a.slug]), {"name": name, "scopes": ["drafts:write"]}
    )
    invite = admin_client.post(
        reverse("admin_members", args=[tenant_a.slug]),
        {"email": "new@example.test", "full_name": name, "role": "approver", "approve": "all"},
    )
    assert (token.status_code, invite.status_code) == (200, 200)
    assert AgentToken.objects.get(tenant=tenant_a).name == name
    assert Invitation.objects.get(tenant=tenant_a).full_name == name
