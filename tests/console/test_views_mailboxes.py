import pytest
from django.urls import reverse

from mailboxes.models import Mailbox
from tenants.models import AuditEvent
from tests.pages import based_on

pytestmark = pytest.mark.django_db


def test_admin_connects_a_mailbox_from_the_browser(tenant_a, member_of, signed_in, sandbox):
    client = signed_in(member_of(tenant_a, "admin").user)
    response = client.post(
        reverse("mailbox_create", args=[tenant_a.slug]),
        {"username": "billing", "display_name": "Billing"},
    )
    mailbox = Mailbox.objects.get(tenant=tenant_a)
    assert response.status_code == 302
    assert mailbox.status == Mailbox.Status.ACTIVE
    assert AuditEvent.objects.filter(tenant=tenant_a, action="mailbox.created").count() == 1


def test_bad_username_shows_the_error_and_creates_nothing(tenant_a, member_of, signed_in, sandbox):
    client = signed_in(member_of(tenant_a, "admin").user)
    response = client.post(
        reverse("mailbox_create", args=[tenant_a.slug]), {"username": "No Spaces"}
    )
    assert response.status_code == 400
    assert b"lower-case letters" in response.content
    assert not Mailbox.objects.exists()


@pytest.mark.parametrize("role", ["approver", "viewer"])
def test_non_admins_see_mailboxes_but_cannot_change_them(
    tenant_a, member_of, signed_in, mailbox_factory, role
):
    mailbox = mailbox_factory(tenant_a)
    client = signed_in(member_of(tenant_a, role).user)
    assert client.get(reverse("mailbox_list", args=[tenant_a.slug])).status_code == 200
    assert (
        client.get(reverse("mailbox_detail", args=[tenant_a.slug, mailbox.pk])).status_code == 200
    )
    assert client.get(reverse("mailbox_create", args=[tenant_a.slug])).status_code == 403
    disable = client.post(
        reverse("mailbox_status", args=[tenant_a.slug, mailbox.pk]), {"status": "disabled"}
    )
    assert disable.status_code == 403
    mailbox.refresh_from_db()
    assert mailbox.status == Mailbox.Status.ACTIVE


def test_admin_disables_and_enables(tenant_a, member_of, signed_in, mailbox_factory):
    mailbox = mailbox_factory(tenant_a)
    client = signed_in(member_of(tenant_a, "admin").user)
    url = reverse("mailbox_status", args=[tenant_a.slug, mailbox.pk])
    client.post(url, {"status": "disabled"})
    mailbox.refresh_from_db()
    assert mailbox.status == Mailbox.Status.DISABLED
    client.post(url, {"status": "active"})
    mailbox.refresh_from_db()
    assert mailbox.status == Mailbox.Status.ACTIVE


def test_restricted_policy_needs_an_allowed_entry(tenant_a, member_of, signed_in, mailbox_factory):
    mailbox = mailbox_factory(tenant_a)
    client = signed_in(member_of(tenant_a, "admin").user)
    url = reverse("mailbox_policy", args=[tenant_a.slug, mailbox.pk])
    base = based_on(client, reverse("mailbox_detail", args=[tenant_a.slug, mailbox.pk]))
    refused = client.post(
        url,
        {
            "policy_mode": "restricted",
            "allowed_domains": "",
            "allowed_addresses": "",
            "based_on": base,
        },
    )
    bad = client.post(
        url,
        {
            "policy_mode": "restricted",
            "allowed_domains": "not a domain",
            "allowed_addresses": "",
            "based_on": base,
        },
    )
    saved = client.post(
        url,
        {
            "policy_mode": "restricted",
            "allowed_domains": "Example.COM\nacme.test",
            "allowed_addresses": "",
            "based_on": base,
        },
    )
    mailbox.refresh_from_db()
    assert refused.status_code == 400 and b"at least one" in refused.content
    assert bad.status_code == 400 and b"Not a domain name" in bad.content
    assert saved.status_code == 302
    assert mailbox.allowed_domains == ["acme.test", "example.com"]
    assert mailbox.allows_recipient("someone@example.com")
    assert not mailbox.allows_recipient("someone@elsewhere.org")


def test_another_tenants_mailbox_is_404(tenant_a, tenant_b, member_of, signed_in, mailbox_factory):
    theirs = mailbox_factory(tenant_b)
    client = signed_in(member_of(tenant_a, "admin").user)
    assert client.get(reverse("mailbox_detail", args=[tenant_a.slug, theirs.pk])).status_code == 404
    assert (
        client.post(
            reverse("mailbox_status", args=[tenant_a.slug, theirs.pk]), {"status": "disabled"}
        ).status_code
        == 404
    )
    theirs.refresh_from_db()
    assert theirs.status == Mailbox.Status.ACTIVE


@pytest.mark.parametrize("brk", ["\u2028", "\x85", "\v", "\r\n"], ids=str.__repr__)
def test_a_display_name_with_a_line_break_is_refused_on_create(
    tenant_a, member_of, signed_in, sandbox, brk
):
    client = signed_in(member_of(tenant_a, "admin").user)
    response = client.post(
        reverse("mailbox_create", args=[tenant_a.slug]),
        {"username": "billing", "display_name": f"Billing{brk}Bcc: evil@example.org"},
    )
    assert response.status_code == 400
    assert b"display name must be a single line" in response.content
    assert not Mailbox.objects.exists()


@pytest.mark.parametrize("brk", ["\u2029", "\x1c", "\f", "\n"], ids=str.__repr__)
def test_a_display_name_with_a_line_break_is_refused_on_update(
    tenant_a, member_of, signed_in, mailbox_factory, brk
):
    mailbox = mailbox_factory(tenant_a)
    before = mailbox.display_name
    client = signed_in(member_of(tenant_a, "admin").user)
    response = client.post(
        reverse("mailbox_policy", args=[tenant_a.slug, mailbox.pk]),
        {
            "display_name": f"Help{brk}Bcc: evil@example.org",
            "policy_mode": "open",
            "based_on": based_on(
                client, reverse("mailbox_detail", args=[tenant_a.slug, mailbox.pk])
            ),
        },
    )
    mailbox.refresh_from_db()
    assert response.status_code == 400
    assert b"display name must be a single line" in response.content
    assert mailbox.display_name == before
    assert not AuditEvent.objects.filter(action="mailbox.policy_changed").exists()


@pytest.mark.parametrize("control", ["\u202e", "\x1b", "\x07"], ids=str.__repr__)
def test_a_display_name_with_a_control_character_is_refused(
    tenant_a, member_of, signed_in, sandbox, control
):
    """The From header's phrase of every message: a right-to-left override makes it read as
    something else in the customer's mail client."""
    client = signed_in(member_of(tenant_a, "admin").user)
    response = client.post(
        reverse("mailbox_create", args=[tenant_a.slug]),
        {"username": "billing", "display_name": f"Billing{control}gnp.exe"},
    )
    assert response.status_code == 400
    assert b"cannot hold the control character U+" in response.content
    assert not Mailbox.objects.exists()


def test_a_policy_save_from_an_older_page_does_not_reopen_a_restricted_mailbox(
    tenant_a, member_of, mailbox_factory
):
    from tests.routed_client import RoutedClient

    mailbox = mailbox_factory(tenant_a)
    alice, bob = RoutedClient(), RoutedClient()
    for client in (alice, bob):
        client.force_login(
            member_of(tenant_a, "admin").user, backend="django.contrib.auth.backends.ModelBackend"
        )
    page = reverse("mailbox_detail", args=[tenant_a.slug, mailbox.pk])
    url = reverse("mailbox_policy", args=[tenant_a.slug, mailbox.pk])
    bobs = bob.get(page).context["form"].initial
    restricted = alice.post(
        url,
        {
            "policy_mode": "restricted",
            "allowed_domains": "example.com",
            "based_on": based_on(alice, page),
        },
    )
    assert restricted.status_code == 302

    refused = bob.post(url, {**bobs, "display_name": "Support team"})

    mailbox.refresh_from_db()
    assert (mailbox.policy_mode, mailbox.allowed_domains) == ("restricted", ["example.com"])
    assert mailbox.display_name != "Support team"
    assert refused.status_code == 409
    assert (
        "Someone changed the policy mode, the allowed domains since you opened this page."
        in refused.content.decode()
    )
    assert refused.context["form"].initial["policy_mode"] == "restricted"
    assert AuditEvent.objects.filter(action="mailbox.policy_changed").count() == 1


# 64-character local part and a domain of labels of at most 63: valid by the usual rules, and
# 301 characters, longer than the 254 the column holds (PostgreSQL would cut it silently).
LONG_ADDRESS = "l" * 64 + "@" + ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 40]) + ".com"


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("allowed_addresses", LONG_ADDRESS, LONG_ADDRESS),
        (
            "allowed_domains",
            "\n".join(f"d{i}.example.com" for i in range(1001)),
            "At most 1000 entries; this list has 1001.",
        ),
        (
            "allowed_addresses",
            "\n".join(f"p{i}@example.com" for i in range(1001)),
            "At most 1000 entries; this list has 1001.",
        ),
    ],
    ids=["address-too-long", "too-many-domains", "too-many-addresses"],
)
def test_an_allow_list_the_policy_cannot_hold_is_refused_naming_why(
    tenant_a, member_of, signed_in, mailbox_factory, field, value, said
):
    mailbox = mailbox_factory(tenant_a)
    client = signed_in(member_of(tenant_a, "admin").user)
    page = reverse("mailbox_detail", args=[tenant_a.slug, mailbox.pk])
    response = client.post(
        reverse("mailbox_policy", args=[tenant_a.slug, mailbox.pk]),
        {"policy_mode": "restricted", field: value, "based_on": based_on(client, page)},
    )
    mailbox.refresh_from_db()
    assert response.status_code == 400
    assert said in response.content.decode()
    assert (mailbox.policy_mode, mailbox.allowed_domains, mailbox.allowed_addresses) == (
        "open",
        [],
        [],
    )


def test_the_page_says_agentmail_still_sends_the_old_name_only_while_the_rename_is_pending(
    tenant_a, member_of, signed_in, mailbox_factory, sandbox
):
    from mailboxes import tasks

    mailbox = mailbox_factory(tenant_a, display_name="Acme Support")
    client = signed_in(member_of(tenant_a, "admin").user)
    page = reverse("mailbox_detail", args=[tenant_a.slug, mailbox.pk])
    before = client.get(page).content.decode()
    saved = client.post(
        reverse("mailbox_policy", args=[tenant_a.slug, mailbox.pk]),
        {"display_name": "Acme Billing", "policy_mode": "open", "based_on": based_on(client, page)},
    )
    pending = client.get(page).content.decode()
    tasks.sync_display_name(mailbox.pk)
    applied = client.get(page).content.decode()

    assert saved.status_code == 302
    assert "data-name-pending" not in before
    assert "AgentMail still sends as “Acme Support”; the new name is being applied" in pending
    assert "data-name-pending" not in applied
    assert "Acme Billing" in applied


def test_the_display_name_sits_under_a_heading_that_names_it_not_under_recipient_policy(
    tenant_a, member_of, signed_in, mailbox_factory
):
    """The sender's name is not part of the recipient policy: the card says it holds both, and
    the "Recipient policy" heading comes after the name, right above the policy's own fields."""
    mailbox = mailbox_factory(tenant_a)
    client = signed_in(member_of(tenant_a, "admin").user)
    html = client.get(reverse("mailbox_detail", args=[tenant_a.slug, mailbox.pk])).content.decode()
    card = html.split('id="sender-and-policy"', 1)[1].split("</section>", 1)[0]

    assert "<h2>Sender name and recipient policy</h2>" in card
    assert (
        card.index('name="display_name"')
        < card.index(">Recipient policy</h3>")
        < card.index('name="policy_mode"')
    )


def test_a_refused_key_is_shown_to_admins_and_reviewers_and_only_an_admin_check_clears_it(
    tenant_a, tenant_b, member_of, signed_in, mailbox_factory, sandbox
):
    """The worker marked the mailbox's key refused with one send waiting: the mailboxes list,
    the mailbox page and Health say so, the send's page tells its reviewer why it waits. An
    approver's or another tenant's admin's "check again" changes nothing; the admin's makes one
    read with the key and, AgentMail accepting it, clears the refusal (audited)."""
    from intents.models import SendIntent
    from mailboxes.key_health import mailbox_key_refused
    from tests.factories import approve_new_draft

    mailbox = mailbox_factory(tenant_a)
    approver = member_of(tenant_a, "approver").user
    intent = approve_new_draft(tenant_a, mailbox, approver)
    mailbox_key_refused(
        mailbox_id=mailbox.pk,
        api_key_id=mailbox.provider_api_key_id,
        detail="401 unknown_api_key: Unknown or revoked API key",
    )
    admin_user = member_of(tenant_a, "admin").user
    admin = signed_in(admin_user)
    listed = admin.get(reverse("mailbox_list", args=[tenant_a.slug]))
    page = admin.get(reverse("mailbox_detail", args=[tenant_a.slug, mailbox.pk]))
    health = admin.get(reverse("admin_home", args=[tenant_a.slug]))
    assert b"data-key-refused-badge" in listed.content
    assert b'data-key-waiting="1"' in page.content and b"unknown_api_key" in page.content
    assert mailbox.address.encode() in health.content and b"data-key-refused" in health.content
    url = reverse("mailbox_key_check", args=[tenant_a.slug, mailbox.pk])
    reviewer = signed_in(approver)  # one test client: each sign-in replaces the last
    send_page = reviewer.get(reverse("outbox_intent", args=[tenant_a.slug, intent.pk]))
    assert b"data-key-refused" in send_page.content
    assert reviewer.post(url).status_code == 403
    outsider = signed_in(member_of(tenant_b, "admin").user)
    outside_url = reverse("mailbox_key_check", args=[tenant_b.slug, mailbox.pk])
    assert outsider.post(outside_url).status_code == 404
    mailbox.refresh_from_db()
    assert mailbox.key_refused
    reads = len(sandbox.requests(route="list_messages", api_key_id=mailbox.provider_api_key_id))

    admin = signed_in(admin_user)
    assert admin.post(url).status_code == 302
    mailbox.refresh_from_db()
    assert not mailbox.key_refused
    after = sandbox.requests(route="list_messages", api_key_id=mailbox.provider_api_key_id)
    assert len(after) == reads + 1
    assert AuditEvent.objects.filter(tenant=tenant_a, action="mailbox.key_restored").count() == 1
    assert SendIntent.objects.get(pk=intent.pk).state == "queued"


def test_an_admin_replaces_a_refused_key_after_confirming_it(
    tenant_a, member_of, signed_in, mailbox_factory, sandbox
):
    """The refused key's box offers "Replace the key"; its POST only asks (nothing is called),
    the confirmed POST gives the mailbox a new key, deletes the old one at AgentMail and clears
    the refusal. The audit page names what was done."""
    from mailboxes.key_health import mailbox_key_refused

    mailbox = mailbox_factory(tenant_a)
    old_id = mailbox.provider_api_key_id
    mailbox_key_refused(mailbox_id=mailbox.pk, api_key_id=old_id, detail="401 unknown_api_key")
    admin = signed_in(member_of(tenant_a, "admin").user)
    url = reverse("mailbox_key_replace", args=[tenant_a.slug, mailbox.pk])
    page = admin.get(reverse("mailbox_detail", args=[tenant_a.slug, mailbox.pk]))
    assert b"data-key-replace" in page.content and url.encode() in page.content
    creates = len(sandbox.requests(route="create_api_key"))

    asked = admin.post(url)
    assert asked.status_code == 200 and b"data-confirm" in asked.content
    assert b'name="confirmed" value="yes"' in asked.content
    assert Mailbox.objects.get(pk=mailbox.pk).provider_api_key_id == old_id
    assert len(sandbox.requests(route="create_api_key")) == creates

    assert admin.post(url, {"confirmed": "yes"}).status_code == 302
    mailbox.refresh_from_db()
    keys = sandbox.sdk().inboxes.api_keys.list(mailbox.inbox_id).api_keys
    assert [k.api_key_id for k in keys] == [mailbox.provider_api_key_id] != [old_id]
    assert not mailbox.key_refused
    audit = admin.get(reverse("admin_audit", args=[tenant_a.slug]))
    assert b"replaced the AgentMail key of" in audit.content


def test_the_key_is_replaced_by_no_one_but_the_tenants_admin(
    tenant_a, tenant_b, member_of, signed_in, mailbox_factory, sandbox
):
    """An approver is refused (403) and sees no button; another tenant's admin, under their own
    tenant or ours, gets the 404 of a missing mailbox. AgentMail is not called, nothing changes."""
    mailbox = mailbox_factory(tenant_a)
    before = Mailbox.objects.values_list("api_key_sealed", "provider_api_key_id").get(pk=mailbox.pk)
    creates = len(sandbox.requests(route="create_api_key"))
    confirmed = {"confirmed": "yes"}
    approver = signed_in(member_of(tenant_a, "approver").user)
    page = approver.get(reverse("mailbox_detail", args=[tenant_a.slug, mailbox.pk]))
    assert b"data-key-replace" not in page.content
    url = reverse("mailbox_key_replace", args=[tenant_a.slug, mailbox.pk])
    assert approver.post(url, confirmed).status_code == 403

    outsider = signed_in(member_of(tenant_b, "admin").user)
    theirs = reverse("mailbox_key_replace", args=[tenant_b.slug, mailbox.pk])
    assert outsider.post(theirs, confirmed).status_code == 404
    assert outsider.post(url, confirmed).status_code == 404

    after = Mailbox.objects.values_list("api_key_sealed", "provider_api_key_id").get(pk=mailbox.pk)
    assert after == before
    assert len(sandbox.requests(route="create_api_key")) == creates


def test_the_admin_is_offered_a_key_replacement_for_a_working_key_too(
    tenant_a, member_of, signed_in, mailbox_factory
):
    mailbox = mailbox_factory(tenant_a)
    admin = signed_in(member_of(tenant_a, "admin").user)
    page = admin.get(reverse("mailbox_detail", args=[tenant_a.slug, mailbox.pk]))
    assert page.content.count(b"data-key-replace") == 1


def test_an_admin_makes_a_deleted_inbox_again_after_confirming_it(
    tenant_a, tenant_b, member_of, signed_in, mailbox_factory, sandbox
):
    """The inbox deleted at AgentMail: the first send refuses its key, "Check the key again"
    says the inbox is gone (not AgentMail's 404), and the refused key's box offers "Make the
    inbox again": its POST only asks, the confirmed one makes the inbox again under a new
    client_id. An approver gets 403, another tenant's admin 404, and nothing changes."""
    from mailboxes.key_health import mailbox_key_refused

    mailbox = mailbox_factory(tenant_a)
    old_client_id = mailbox.client_id
    sandbox.sdk().inboxes.delete(mailbox.inbox_id)
    mailbox_key_refused(
        mailbox_id=mailbox.pk, api_key_id=mailbox.provider_api_key_id, detail="401 unknown_api_key"
    )
    admin = signed_in(member_of(tenant_a, "admin").user)
    detail = reverse("mailbox_detail", args=[tenant_a.slug, mailbox.pk])
    url = reverse("mailbox_inbox_recover", args=[tenant_a.slug, mailbox.pk])
    checked = admin.post(reverse("mailbox_key_check", args=[tenant_a.slug, mailbox.pk]))
    page = admin.get(checked.url)
    assert b"AgentMail no longer has the inbox" in page.content
    assert b"data-inbox-recover" in page.content and url.encode() in page.content
    approver = signed_in(member_of(tenant_a, "approver").user)
    assert approver.post(url, {"confirmed": "yes"}).status_code == 403
    outsider = signed_in(member_of(tenant_b, "admin").user)
    assert outsider.post(url, {"confirmed": "yes"}).status_code == 404
    admin = signed_in(member_of(tenant_a, "admin").user)
    asked = admin.post(url)
    assert asked.status_code == 200 and b"data-confirm" in asked.content
    assert Mailbox.objects.get(pk=mailbox.pk).client_id == old_client_id

    done = admin.post(url, {"confirmed": "yes"})

    assert done.status_code == 302 and done.url == detail
    mailbox.refresh_from_db()
    assert mailbox.client_id != old_client_id
    assert (mailbox.status, mailbox.key_refused) == ("active", False)
    assert sandbox.sdk().inboxes.get(mailbox.inbox_id).client_id == mailbox.client_id
    audit = admin.get(reverse("admin_audit", args=[tenant_a.slug]))
    assert b"AgentMail no longer had the inbox of" in audit.content


def test_a_disabled_mailbox_made_again_is_not_said_to_send_its_waiting_sends(
    tenant_a, member_of, signed_in, mailbox_factory, sandbox
):
    """The page said "its waiting sends go out now" after making a disabled mailbox's inbox
    again (or after its key was accepted again), while a disabled mailbox sends nothing: it
    says that the mailbox stays disabled instead."""
    from mailboxes import provisioning
    from mailboxes.key_health import mailbox_key_refused

    mailbox = mailbox_factory(tenant_a)
    admin_user = member_of(tenant_a, "admin").user
    provisioning.mailbox_set_status(
        tenant=tenant_a, mailbox_id=mailbox.pk, status="disabled", actor=admin_user
    )
    sandbox.sdk().inboxes.delete(mailbox.inbox_id)
    admin = signed_in(admin_user)
    url = reverse("mailbox_inbox_recover", args=[tenant_a.slug, mailbox.pk])

    done = admin.post(url, {"confirmed": "yes"}, follow=True)
    mailbox.refresh_from_db()
    mailbox_key_refused(
        mailbox_id=mailbox.pk, api_key_id=mailbox.provider_api_key_id, detail="401 unknown_api_key"
    )
    checked = admin.post(
        reverse("mailbox_key_check", args=[tenant_a.slug, mailbox.pk]), follow=True
    )

    for page in (done, checked):
        text = page.content.decode()
        assert "go out now" not in text
        assert "stays disabled: nothing is sent from it until it is enabled" in text


ENCODED_WORDS = ["=?utf-8?B?UGF5UGFsIFNlY3VyaXR5?=", "Billing =?ISO-8859-1?q?Bank_Team?="]


@pytest.mark.parametrize("word", ENCODED_WORDS)
def test_a_display_name_with_an_encoded_word_is_refused_on_create(
    tenant_a, member_of, signed_in, sandbox, word
):
    """Found by an outside probe: the From header's phrase is decoded by the customer's mail
    client, so '=?utf-8?B?UGF5UGFsIFNlY3VyaXR5?=' showed as 'PayPal Security', a name the admin
    never read; refused as in a draft's subject."""
    client = signed_in(member_of(tenant_a, "admin").user)
    response = client.post(
        reverse("mailbox_create", args=[tenant_a.slug]),
        {"username": "billing", "display_name": word},
    )
    assert response.status_code == 400
    assert b"The display name cannot hold the encoded word =?" in response.content
    assert not Mailbox.objects.exists()


@pytest.mark.parametrize("word", ENCODED_WORDS)
def test_a_display_name_with_an_encoded_word_is_refused_on_update(
    tenant_a, member_of, signed_in, mailbox_factory, word
):
    mailbox = mailbox_factory(tenant_a)
    before = mailbox.display_name
    client = signed_in(member_of(tenant_a, "admin").user)
    response = client.post(
        reverse("mailbox_policy", args=[tenant_a.slug, mailbox.pk]),
        {
            "display_name": word,
            "policy_mode": "open",
            "based_on": based_on(
                client, reverse("mailbox_detail", args=[tenant_a.slug, mailbox.pk])
            ),
        },
    )
    mailbox.refresh_from_db()
    assert response.status_code == 400
    assert b"The display name cannot hold the encoded word =?" in response.content
    assert mailbox.display_name == before


INVISIBLE_IN_NAMES = {
    "zero width space": ("Pay\u200bPal Security", "U+200B ZERO WIDTH SPACE"),
    "word joiner": ("Billing\u2060Team", "U+2060 WORD JOINER"),
    "tag characters": ("Support\U000e0041\U000e0042", "U+E0041 TAG LATIN CAPITAL LETTER A"),
    "byte order mark": ("\ufeffBilling", "U+FEFF ZERO WIDTH NO-BREAK SPACE"),
    "hangul filler": ("Billing\u3164", "U+3164 HANGUL FILLER"),
}


@pytest.mark.parametrize(("name", "said"), INVISIBLE_IN_NAMES.values(), ids=INVISIBLE_IN_NAMES)
def test_a_display_name_with_invisible_characters_is_refused_on_create(
    tenant_a, member_of, signed_in, sandbox, name, said
):
    """The From name refused control and bidi characters but not the ones that draw nothing:
    'Pay\u200bPal Security' reads as 'PayPal Security' to the customer and to the admin who
    looks at the list, and is not the same name. Refused as in a draft's text."""
    client = signed_in(member_of(tenant_a, "admin").user)
    response = client.post(
        reverse("mailbox_create", args=[tenant_a.slug]),
        {"username": "billing", "display_name": name},
    )
    assert response.status_code == 400
    assert b"The display name cannot hold characters nobody sees: " in response.content
    assert said.encode() in response.content
    assert not Mailbox.objects.exists()


def test_a_display_name_with_invisible_characters_is_refused_on_update(
    tenant_a, member_of, signed_in, mailbox_factory
):
    mailbox = mailbox_factory(tenant_a)
    before = mailbox.display_name
    client = signed_in(member_of(tenant_a, "admin").user)
    response = client.post(
        reverse("mailbox_policy", args=[tenant_a.slug, mailbox.pk]),
        {
            "display_name": "Pay\u200bPal Security",
            "policy_mode": "open",
            "based_on": based_on(
                client, reverse("mailbox_detail", args=[tenant_a.slug, mailbox.pk])
            ),
        },
    )
    mailbox.refresh_from_db()
    assert response.status_code == 400
    assert b"U+200B ZERO WIDTH SPACE" in response.content
    assert mailbox.display_name == before


def test_a_display_name_keeps_the_joiners_scripts_and_emoji_are_written_with(
    tenant_a, member_of, signed_in, sandbox
):
    """What a draft's check lets through (common.text.INVISIBLE_CHARACTERS): a Persian word's
    non-joiner, an emoji sequence's joiner."""
    name = "\u067e\u0634\u062a\u06cc\u0628\u0627\u0646\u06cc\u200c\u0647\u0627 \U0001f469\u200d\U0001f4bb"
    client = signed_in(member_of(tenant_a, "admin").user)
    client.post(
        reverse("mailbox_create", args=[tenant_a.slug]),
        {"username": "billing", "display_name": name},
    )
    assert Mailbox.objects.get().display_name == name


def test_a_display_name_may_hold_what_only_looks_like_part_of_an_encoded_word(
    tenant_a, member_of, signed_in, sandbox
):
    client = signed_in(member_of(tenant_a, "admin").user)
    client.post(
        reverse("mailbox_create", args=[tenant_a.slug]),
        {"username": "billing", "display_name": "Billing =? Team ?= \u200fمیشود"},
    )
    assert Mailbox.objects.get().display_name == "Billing =? Team ?= \u200fمیشود"
