"""intents/policy.py on its own: address normalisation, recipient problems, suppression look-ups
and approval rights, each rule checked where it lives (not only through the services)."""

from __future__ import annotations

import sys

import pytest
from django.db import connection

from intents.models import DraftVersion, Suppression
from intents.policy import (
    MAX_ADDRESS_LENGTH,
    RecipientProblem,
    SuppressedAs,
    active_membership,
    active_memberships,
    answered_author_left_out,
    approvable_mailbox_ids,
    can_approve,
    files_of_others,
    may_decide,
    mixed_thread_domains,
    needs_another_approver,
    normalize_address,
    recipient_breaks_policy_sql,
    recipient_problems,
    suppressed_addresses,
    suppression_keys,
)
from intents.services.suppressions import suppressions_record
from mailboxes.models import Mailbox
from tests.factories import make_local_mailbox

# A valid address of exactly 254 characters: 64-character local part, 189-character domain.
AT_LIMIT = "a" * 64 + "@" + "b" * 63 + "." + "c" * 63 + "." + "d" * 57 + ".com"
OVER_LIMIT = "a" * 64 + "@" + "b" * 63 + "." + "c" * 63 + "." + "d" * 58 + ".com"


def test_the_length_limit_is_254_characters_inclusive():
    assert len(AT_LIMIT) == MAX_ADDRESS_LENGTH == 254
    assert normalize_address(AT_LIMIT) == AT_LIMIT
    assert normalize_address(f"  {AT_LIMIT}  ") == AT_LIMIT
    with pytest.raises(ValueError) as caught:
        normalize_address(OVER_LIMIT)
    assert str(caught.value) == f"{OVER_LIMIT[:40]}… is longer than 254 characters"


@pytest.mark.parametrize("value", [None, 42, b"a@example.com", ["a@example.com"]])
def test_an_address_that_is_not_a_string_is_refused(value):
    with pytest.raises(ValueError) as caught:
        normalize_address(value)
    assert str(caught.value) == "an address must be a string"


@pytest.mark.parametrize("value", ["", "   ", "\t\n"])
def test_an_empty_address_is_refused(value):
    with pytest.raises(ValueError) as caught:
        normalize_address(value)
    assert str(caught.value) == "an address is empty"


def test_addresses_are_stripped_and_lower_cased_whole():
    assert normalize_address("  Zoë.Dupont@Example.COM ") == "zoë.dupont@example.com"


def test_an_invalid_address_names_itself_and_the_reason():
    with pytest.raises(ValueError) as caught:
        normalize_address(" not-an-address ")
    assert str(caught.value).startswith("not-an-address is not a valid email address: ")
    assert len(str(caught.value)) > len("not-an-address is not a valid email address: ")


def test_the_reserved_test_domain_is_accepted_outside_production_only(settings):
    assert normalize_address("someone@shop.test") == "someone@shop.test"
    settings.PRODUCTION = True
    with pytest.raises(ValueError, match=r"someone@shop\.test is not a valid email address"):
        normalize_address("someone@shop.test")


@pytest.fixture
def mailbox(tenant_a):
    return make_local_mailbox(tenant_a)


def _restrict(mailbox, *, domains=(), addresses=()):
    mailbox.policy_mode = Mailbox.PolicyMode.RESTRICTED
    mailbox.allowed_domains = list(domains)
    mailbox.allowed_addresses = list(addresses)
    mailbox.save()
    return mailbox


def test_no_problems_for_allowed_unsuppressed_addresses(tenant_a, mailbox):
    assert recipient_problems(tenant=tenant_a, mailbox=mailbox, addresses=["A@example.com"]) == []


def test_every_problem_is_named_in_input_order(tenant_a, tenant_b, mailbox):
    _restrict(mailbox, domains=["example.com"])
    Suppression.objects.create(tenant=tenant_a, address="gone@example.com", reason="bounced")
    # Suppressed in another tenant only: not a problem here.
    Suppression.objects.create(tenant=tenant_b, address="ok@example.com", reason="bounced")

    problems = recipient_problems(
        tenant=tenant_a,
        mailbox=mailbox,
        addresses=["bad address", " Outside@Elsewhere.org", "Gone@example.com", "ok@example.com"],
    )

    assert problems == [
        RecipientProblem("bad address", "invalid", problems[0].message),
        RecipientProblem(
            "outside@elsewhere.org",
            "not_allowed",
            f"outside@elsewhere.org is outside the recipient policy of {mailbox.address}",
        ),
        RecipientProblem(
            "gone@example.com",
            "suppressed",
            "gone@example.com is on this tenant's suppression list (bounced, complained or "
            "rejected before)",
        ),
    ]
    assert problems[0].message.startswith("bad address is not a valid email address: ")


@pytest.mark.parametrize(
    ("address", "keys"),
    [
        ("ana@example.com", ("ana@example.com",)),
        ("ana+billing@example.com", ("ana+billing@example.com", "ana@example.com")),
        # Cut at the first "+", as Gmail, Outlook, Fastmail and Proton deliver it.
        ("ana+a+b@example.com", ("ana+a+b@example.com", "ana@example.com")),
        # Nothing before the "+": no base address to be a sub-address of.
        ("+news@example.com", ("+news@example.com",)),
        # The domain in its stored (A-label) form, the local part as stored (Unicode, NFC).
        (
            "jos\u00e9+x@xn--bcher-kva.de",
            ("jos\u00e9+x@xn--bcher-kva.de", "jos\u00e9@xn--bcher-kva.de"),
        ),
    ],
)
def test_the_suppression_keys_of_an_address_are_itself_and_its_base_address(address, keys):
    assert suppression_keys(address) == keys


def test_a_suppressed_address_covers_its_sub_addresses_naming_the_entry(tenant_a, mailbox):
    Suppression.objects.create(tenant=tenant_a, address="ana@example.com", reason="complained")

    problems = recipient_problems(
        tenant=tenant_a, mailbox=mailbox, addresses=["Ana+Billing@Example.com", "ana@example.com"]
    )

    assert problems == [
        RecipientProblem(
            "ana+billing@example.com",
            "suppressed",
            "ana+billing@example.com is on this tenant's suppression list as ana@example.com "
            "(complained): a sub-address reaches the same mailbox",
        ),
        RecipientProblem(
            "ana@example.com",
            "suppressed",
            "ana@example.com is on this tenant's suppression list (bounced, complained or "
            "rejected before)",
        ),
    ]


def test_a_suppressed_sub_address_covers_neither_its_base_nor_another_sub_address(
    tenant_a, mailbox
):
    Suppression.objects.create(tenant=tenant_a, address="ana+news@example.com", reason="bounced")

    problems = recipient_problems(
        tenant=tenant_a,
        mailbox=mailbox,
        addresses=["ana@example.com", "ana+other@example.com", "ana+news@example.com"],
    )

    assert [(p.address, p.code) for p in problems] == [("ana+news@example.com", "suppressed")]


def test_an_idn_address_suppressed_in_unicode_covers_its_sub_addresses(tenant_a, mailbox):
    suppressions_record(
        tenant_id=tenant_a.pk, addresses=["Ana@B\u00fccher.de"], reason="bounced", source="t"
    )

    problems = recipient_problems(
        tenant=tenant_a, mailbox=mailbox, addresses=["ana+shop@xn--bcher-kva.de"]
    )

    assert [(p.address, p.code) for p in problems] == [("ana+shop@xn--bcher-kva.de", "suppressed")]
    assert "as ana@xn--bcher-kva.de (bounced)" in problems[0].message


def test_the_batch_look_up_finds_base_addresses_in_one_query(
    tenant_a, tenant_b, django_assert_num_queries
):
    Suppression.objects.create(tenant=tenant_a, address="ana@example.com", reason="complained")
    Suppression.objects.create(tenant=tenant_b, address="ben@example.com", reason="manual")
    asked = [
        (tenant_a.pk, "ana+x@example.com"),
        (tenant_a.pk, "ana+y@example.com"),
        (tenant_a.pk, "ben+x@example.com"),  # ben@ is suppressed in tenant B only
        (tenant_b.pk, "ben+z@example.com"),
        (tenant_b.pk, "ana@example.com"),
    ]

    with django_assert_num_queries(1):
        found = suppressed_addresses(asked)

    assert {pair: (s.address, s.reason) for pair, s in found.items()} == {
        (tenant_a.pk, "ana+x@example.com"): ("ana@example.com", "complained"),
        (tenant_a.pk, "ana+y@example.com"): ("ana@example.com", "complained"),
        (tenant_b.pk, "ben+z@example.com"): ("ben@example.com", "manual"),
    }


@pytest.mark.parametrize(
    "address", ["x%evil.org@partner.org", "evil.org!x@partner.org", "a!b%c@partner.org"]
)
def test_a_local_part_that_names_another_destination_is_not_allowed_by_its_domain(
    tenant_a, mailbox, address
):
    """ "x%evil.org@partner.org" is at partner.org, and a server there that still honours the
    percent hack (Postfix does by default for its own domains) or bang paths passes it on to
    evil.org: a restricted mailbox's domain rule would have let a send leave the allow-list."""
    _restrict(mailbox, domains=["partner.org"])
    [problem] = recipient_problems(tenant=tenant_a, mailbox=mailbox, addresses=[address])
    assert problem.code == "not_allowed"
    assert problem.message == (
        f"{address} is outside the recipient policy of {mailbox.address}: the part before the @ "
        "names another destination (with % or !), which a mail server of that domain may pass "
        "on. An admin may allow this exact address."
    )


def test_an_address_with_a_routing_character_is_allowed_by_name_or_in_an_open_mailbox(
    tenant_a, mailbox
):
    address = "x%evil.org@partner.org"
    assert recipient_problems(tenant=tenant_a, mailbox=mailbox, addresses=[address]) == []
    _restrict(mailbox, domains=["partner.org"], addresses=["X%Evil.org@partner.org"])
    assert recipient_problems(tenant=tenant_a, mailbox=mailbox, addresses=[address]) == []
    # Outside both lists it is refused with the plain reason: its domain is not allowed either.
    _restrict(mailbox, domains=["example.com"])
    [problem] = recipient_problems(tenant=tenant_a, mailbox=mailbox, addresses=[address])
    assert problem.message == f"{address} is outside the recipient policy of {mailbox.address}"


def test_a_non_string_recipient_is_an_invalid_problem_not_a_crash(tenant_a, mailbox):
    problems = recipient_problems(tenant=tenant_a, mailbox=mailbox, addresses=[None])

    assert problems == [RecipientProblem("None", "invalid", "an address must be a string")]


def test_given_suppressed_addresses_are_used_without_a_query(
    tenant_a, mailbox, django_assert_num_queries
):
    Suppression.objects.create(tenant=tenant_a, address="stored@example.com", reason="bounced")

    with django_assert_num_queries(0):
        problems = recipient_problems(
            tenant=tenant_a,
            mailbox=mailbox,
            addresses=["given@example.com", "stored@example.com"],
            suppressed={"given@example.com": SuppressedAs("given@example.com", "bounced")},
        )

    assert [(p.address, p.code) for p in problems] == [("given@example.com", "suppressed")]


def test_only_invalid_addresses_read_no_suppressions(tenant_a, mailbox, django_assert_num_queries):
    with django_assert_num_queries(0):
        problems = recipient_problems(tenant=tenant_a, mailbox=mailbox, addresses=["x", ""])

    assert [p.code for p in problems] == ["invalid", "invalid"]


def test_suppressed_addresses_returns_exactly_the_pairs_asked_for(tenant_a, tenant_b):
    Suppression.objects.create(tenant=tenant_a, address="a@example.com", reason="bounced")
    Suppression.objects.create(tenant=tenant_b, address="b@example.com", reason="complained")

    # (tenant A, b@) and (tenant B, a@) match the query's two IN lists but are not suppressed.
    asked = {
        (tenant_a.pk, "a@example.com"),
        (tenant_a.pk, "b@example.com"),
        (tenant_b.pk, "a@example.com"),
    }

    assert suppressed_addresses(asked) == {
        (tenant_a.pk, "a@example.com"): SuppressedAs("a@example.com", "bounced")
    }


def test_suppressed_addresses_of_nothing_is_empty_without_a_query(db, django_assert_num_queries):
    with django_assert_num_queries(0):
        assert suppressed_addresses([]) == {}


@pytest.mark.parametrize("role", ["admin", "approver"])
def test_a_deciding_member_with_all_mailboxes_may_approve(tenant_a, mailbox, member_of, role):
    assert can_approve(membership=member_of(tenant_a, role), mailbox=mailbox) is True


def test_a_viewer_may_not_approve(tenant_a, mailbox, member_of):
    assert can_approve(membership=member_of(tenant_a, "viewer"), mailbox=mailbox) is False


def test_no_membership_may_not_approve(mailbox):
    assert can_approve(membership=None, mailbox=mailbox) is False


def test_an_inactive_membership_may_not_approve(tenant_a, mailbox, member_of):
    membership = member_of(tenant_a, "admin", is_active=False)

    assert can_approve(membership=membership, mailbox=mailbox) is False


def test_a_member_whose_user_is_inactive_may_not_approve(tenant_a, mailbox, member_of):
    membership = member_of(tenant_a, "admin")
    membership.user.is_active = False
    membership.user.save()

    assert can_approve(membership=membership, mailbox=mailbox) is False


def test_a_member_of_another_tenant_may_not_approve(tenant_b, mailbox, member_of):
    assert can_approve(membership=member_of(tenant_b, "admin"), mailbox=mailbox) is False


def test_per_mailbox_rights_allow_only_the_named_mailboxes(tenant_a, mailbox, member_of):
    other = make_local_mailbox(tenant_a, username="billing")
    membership = member_of(tenant_a, "approver", approve_all_mailboxes=False)
    membership.approve_mailboxes.add(other)

    assert can_approve(membership=membership, mailbox=other) is True
    assert can_approve(membership=membership, mailbox=mailbox) is False


@pytest.mark.parametrize("role", ["admin", "approver"])
def test_a_deciding_member_with_all_mailboxes_may_decide_for_every_mailbox(
    tenant_a, member_of, role, django_assert_num_queries
):
    membership = member_of(tenant_a, role)

    with django_assert_num_queries(0):
        assert approvable_mailbox_ids(membership) is None


@pytest.mark.parametrize("all_mailboxes", [True, False])
def test_a_viewer_may_decide_for_no_mailbox(tenant_a, mailbox, member_of, all_mailboxes):
    membership = member_of(tenant_a, "viewer", approve_all_mailboxes=all_mailboxes)
    membership.approve_mailboxes.add(mailbox)

    assert approvable_mailbox_ids(membership) == set()


def test_per_mailbox_rights_give_exactly_the_named_mailbox_ids(tenant_a, mailbox, member_of):
    billing = make_local_mailbox(tenant_a, username="billing")
    sales = make_local_mailbox(tenant_a, username="sales")
    membership = member_of(tenant_a, "approver", approve_all_mailboxes=False)
    membership.approve_mailboxes.add(billing, sales)
    nothing = member_of(tenant_a, "admin", approve_all_mailboxes=False)

    assert approvable_mailbox_ids(membership) == {billing.pk, sales.pk}
    assert approvable_mailbox_ids(nothing) == set()


def test_may_decide_is_every_mailbox_for_none_and_only_the_listed_ones_otherwise():
    assert may_decide(None, 7) is True
    assert may_decide({7, 9}, 7) is True
    assert may_decide({7, 9}, 8) is False
    assert may_decide(set(), 7) is False


def test_the_author_of_a_person_edit_needs_another_approver_when_the_tenant_asks(
    tenant_a, member_of
):
    author = member_of(tenant_a).user
    other = member_of(tenant_a).user
    person, agent = DraftVersion.Author.PERSON, DraftVersion.Author.AGENT

    def needs(*, on=True, kind=person, author_id=author.pk, user=author) -> bool:
        tenant_a.second_approver_on_edit = on
        return needs_another_approver(
            tenant=tenant_a, author_kind=kind, author_user_id=author_id, user=user
        )

    assert needs() is True
    assert needs(on=False) is False  # the tenant's policy is off
    assert needs(kind=agent) is False  # the agent wrote it: whoever approves is a second person
    assert needs(kind=agent, author_id=None) is False
    assert needs(user=other) is False  # someone else approves
    assert needs(user=None) is False
    assert needs(author_id=None, user=None) is False


def test_active_membership_is_the_users_active_row_in_that_tenant(
    tenant_a, tenant_b, member_of, django_assert_num_queries
):
    member_of(tenant_a, "admin")  # someone else's row in the same tenant comes first
    membership = member_of(tenant_a, "approver")

    with django_assert_num_queries(1):
        found = active_membership(tenant=tenant_a, user=membership.user)
        assert found.user.is_active  # loaded with the row: callers check it without a query
    assert found == membership
    assert active_membership(tenant=tenant_b, user=membership.user) is None
    assert active_membership(tenant=tenant_a, user=None) is None
    membership.is_active = False
    membership.save()
    assert active_membership(tenant=tenant_a, user=membership.user) is None


def test_active_membership_of_an_inactive_user_is_none(tenant_a, member_of):
    membership = member_of(tenant_a, "approver")
    membership.user.is_active = False
    membership.user.save()

    assert active_membership(tenant=tenant_a, user=membership.user) is None


def test_active_memberships_returns_exactly_the_pairs_asked_for(
    tenant_a, tenant_b, member_of, django_assert_num_queries
):
    one_a = member_of(tenant_a, "approver")
    two_a = member_of(tenant_a, "approver")
    one_b = member_of(tenant_b, "approver", user=one_a.user)
    member_of(tenant_b, "approver", user=two_a.user, is_active=False)
    inactive_user = member_of(tenant_a, "approver")
    inactive_user.user.is_active = False
    inactive_user.user.save()
    u1, u2 = one_a.user_id, two_a.user_id

    with django_assert_num_queries(1):
        found = active_memberships(
            [(tenant_a.pk, u1), (tenant_b.pk, u2), (tenant_a.pk, inactive_user.user_id)]
        )
        assert all(m.user.is_active for m in found.values())  # users loaded with the rows

    assert found == {(tenant_a.pk, u1): one_a}
    assert active_memberships({(tenant_b.pk, u1), (tenant_a.pk, u2)}) == {
        (tenant_b.pk, u1): one_b,
        (tenant_a.pk, u2): two_a,
    }


def test_active_memberships_of_nothing_is_empty_without_a_query(db, django_assert_num_queries):
    with django_assert_num_queries(0):
        assert active_memberships([]) == {}


def _sql_says_breaks(tenant, mailbox, address) -> bool:
    sql = recipient_breaks_policy_sql(
        address="%(address)s::text", tenant_id="%(tenant)s", mailbox_id="%(mailbox)s"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {sql}", {"address": address, "tenant": tenant.pk, "mailbox": mailbox.pk}
        )
        return cursor.fetchone()[0]


@pytest.mark.parametrize(
    "address",
    [
        "boss@example.com",
        "BOSS@example.com",
        "other@example.com",
        "anyone@partner.org",
        "anyone@sub.partner.org",
        "gone@partner.org",
        "x%evil.org@partner.org",
        "evil.org!x@partner.org",
        "b%oss@example.com",
        "per%cent@example.com",
        "gone+x@partner.org",
        "gone+@partner.org",
        "news@partner.org",
        "news+other@partner.org",
        "news+tag@partner.org",
        "news+tag+more@partner.org",
        "+tag@partner.org",
    ],
)
@pytest.mark.parametrize("restricted", [True, False], ids=["restricted", "open"])
def test_the_sql_form_of_the_recipient_rule_agrees_with_the_python_form(
    tenant_a, mailbox, address, restricted
):
    if restricted:
        _restrict(
            mailbox,
            domains=["Partner.ORG"],
            addresses=["Boss@Example.com", "Per%Cent@example.com"],
        )
    Suppression.objects.create(tenant=tenant_a, address="gone@partner.org", reason="bounced")
    Suppression.objects.create(tenant=tenant_a, address="news+tag@partner.org", reason="bounced")
    Suppression.objects.create(tenant=tenant_a, address="+tag@partner.org", reason="bounced")
    python_says = bool(recipient_problems(tenant=tenant_a, mailbox=mailbox, addresses=[address]))
    assert _sql_says_breaks(tenant_a, mailbox, address) is python_says


def test_a_thread_of_one_organisation_is_one_domain_and_its_subdomains():
    assert mixed_thread_domains(["ana <ana@ana.test>", "bo@mail.ana.test", "x@ANA.test"]) == []
    assert mixed_thread_domains(["ana@gmail.test", "ben@gmail.test"]) == []
    assert mixed_thread_domains(["Ana <ana@ana.test>", "ben@other.test", "not an address"]) == [
        "ana.test",
        "other.test",
    ]
    # The address is the part in the last angle brackets, as on_thread reads it.
    assert mixed_thread_domains(["ana@ana.test <ben@other.test>", "ana@ana.test"]) == [
        "ana.test",
        "other.test",
    ]


def test_telling_a_threads_organisations_apart_grows_with_its_senders_not_their_square():
    """A customer can put thousands of messages from as many domains into one thread (its own,
    by In-Reply-To); every queue page showing a reply in it, the draft page and a list's approval
    ask this. Comparing every domain with every other took 8 s for 10,000 senders. Counted in
    calls (a profiler's events), not timed."""
    senders = [f"x <a@s{i}.evil.test>" for i in range(1500)] + ["b@deep.s7.evil.test"]
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        calls += 1

    sys.setprofile(count)
    try:
        found = mixed_thread_domains(senders)
    finally:
        sys.setprofile(None)

    assert found == sorted(f"s{i}.evil.test" for i in range(1500))
    assert calls < 50 * len(senders)


def test_a_reply_must_go_to_the_author_of_the_message_it_answers():
    assert answered_author_left_out(["ana@x.test"], "Ben <ben@x.test>")
    assert not answered_author_left_out(["ana@x.test", "BEN@x.test"], "Ben <Ben@X.test>")
    assert not answered_author_left_out(["ana@x.test"], "")


def test_a_forwarded_file_goes_back_to_its_sender_only():
    files = [("passport.pdf", "Ana <ana@x.test>"), ("terms.pdf", ""), ("id.pdf", "ben@x.test")]
    assert files_of_others(files, ["ben@x.test"]) == [("passport.pdf", "ana@x.test")]
    assert files_of_others(files, ["ana@x.test", "ben@x.test"]) == []


@pytest.mark.parametrize(
    "spelling", ["support.{slug}+x@agentmail.test", "SUPPORT.{slug}+Loop@AgentMail.TEST"]
)
@pytest.mark.parametrize("restricted", [True, False], ids=["restricted", "open"])
def test_a_sub_address_of_the_sending_mailbox_is_its_own_address(
    tenant_a, mailbox, spelling, restricted
):
    """support.a+x@... is the sending inbox with a tag: where a server honours sub-addresses
    (RFC 5233) it lands in that inbox, which may start the agent again (a mail loop), and
    AgentMail documents no such routing, so it is at best undeliverable. An inbox's username
    cannot hold a "+" (``mailboxes.provisioning.USERNAME_RE``), so no other mailbox of ours is
    ever refused by this. The exact address was refused, any tagged spelling taken."""
    address = spelling.format(slug=tenant_a.slug)
    domain = mailbox.address.partition("@")[2]
    if restricted:
        _restrict(mailbox, domains=[domain])

    [problem] = recipient_problems(tenant=tenant_a, mailbox=mailbox, addresses=[address])

    assert problem.code == "own_mailbox"
    assert "is the sending mailbox's own address" in problem.message
    assert _sql_says_breaks(tenant_a, mailbox, address) is True


@pytest.mark.parametrize(
    "address",
    [
        "support.{slug}x@agentmail.test",
        "x+support.{slug}@agentmail.test",
        "support.{slug}+x@other.test",
    ],
)
def test_an_address_that_only_resembles_the_sending_mailbox_is_not_its_own(
    tenant_a, mailbox, address
):
    address = address.format(slug=tenant_a.slug)

    assert recipient_problems(tenant=tenant_a, mailbox=mailbox, addresses=[address]) == []
    assert _sql_says_breaks(tenant_a, mailbox, address) is False


def test_another_mailbox_of_the_tenant_and_another_tenants_are_recipients_like_any(
    tenant_a, tenant_b, mailbox
):
    """Deliberate: a mailbox writes to its tenant's other mailboxes (a case handed from sales to
    support) and to another tenant's (to us it is an address like any other, and refusing it
    would tell one tenant which addresses are another's). Each such message is approved by a
    person, so no loop runs unattended; only the sending inbox itself is refused."""
    sibling = make_local_mailbox(tenant_a, username="sales")
    elsewhere = make_local_mailbox(tenant_b)
    addresses = [sibling.address, f"sales.{tenant_a.slug}+x@agentmail.test", elsewhere.address]

    assert recipient_problems(tenant=tenant_a, mailbox=mailbox, addresses=addresses) == []
    assert not any(_sql_says_breaks(tenant_a, mailbox, a) for a in addresses)
