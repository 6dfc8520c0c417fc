"""The broadcast pages as an outsider and as a second reviewer: another tenant's admin gets the
same 404 as for a missing broadcast, a viewer cannot decide, a stale hash approves nothing."""

import pytest

from intents.models import Broadcast, Suppression
from intents.services.broadcasts import broadcast_create, broadcast_replace_recipients
from tests.factories import make_local_mailbox

pytestmark = pytest.mark.django_db


@pytest.fixture
def broadcast(tenant_a):
    return broadcast_create(
        tenant=tenant_a,
        mailbox=make_local_mailbox(tenant_a),
        subject="Delay {{ n }}",
        text="Hello {{ n }}",
        recipients=[{"address": f"p{i}@example.com", "variables": {"n": i}} for i in range(3)],
    )


def url(broadcast, tail=""):
    return f"/t/{broadcast.tenant.slug}/broadcasts/{broadcast.pk}/{tail}"


def test_page_shows_the_sample_and_the_hash(signed_in, member_of, broadcast):
    client = signed_in(member_of(broadcast.tenant, "approver").user)
    page = client.get(url(broadcast)).content.decode()
    assert "Delay 0" in page
    assert broadcast.content_hash in page


def test_other_tenants_admin_gets_404(signed_in, member_of, tenant_b, broadcast):
    client = signed_in(member_of(tenant_b, "admin").user)
    other = f"/t/{tenant_b.slug}/broadcasts/{broadcast.pk}/"
    assert client.get(other).status_code == 404
    response = client.post(other + "approve/", {"content_hash": broadcast.content_hash})
    assert response.status_code == 404
    assert Broadcast.objects.get(pk=broadcast.pk).state == "pending_review"


def test_viewer_cannot_approve(signed_in, member_of, broadcast):
    client = signed_in(member_of(broadcast.tenant, "viewer").user)
    response = client.post(url(broadcast, "approve/"), {"content_hash": broadcast.content_hash})
    assert response.status_code == 403
    assert Broadcast.objects.get(pk=broadcast.pk).state == "pending_review"


def test_stale_hash_approves_nothing(signed_in, member_of, broadcast):
    client = signed_in(member_of(broadcast.tenant, "approver").user)
    shown = broadcast.content_hash
    broadcast_replace_recipients(
        tenant=broadcast.tenant,
        broadcast_id=broadcast.pk,
        recipients=[{"address": "q@example.com", "variables": {"n": 1}}],
    )
    response = client.post(url(broadcast, "approve/"), {"content_hash": shown}, follow=True)
    assert "changed since you opened it" in response.content.decode()
    assert Broadcast.objects.get(pk=broadcast.pk).state == "pending_review"


def test_a_rejection_from_a_page_opened_before_the_recipients_were_replaced_rejects_nothing(
    signed_in, member_of, broadcast
):
    """Found by an outside probe: a rejection named no content, so one typed on a page opened
    before the agent replaced the recipients rejected a list the reviewer never saw, and the
    agent read the reason as said of its new list (a draft's rejection names its version for
    the same reason). It names the hash its page showed, as an approval does."""
    client = signed_in(member_of(broadcast.tenant, "approver").user)
    page = client.get(url(broadcast)).content.decode()
    shown = broadcast.content_hash
    assert page.count(f'name="content_hash" value="{shown}"') == 2
    broadcast_replace_recipients(
        tenant=broadcast.tenant,
        broadcast_id=broadcast.pk,
        recipients=[{"address": "q@example.com", "variables": {"n": 1}}],
    )
    stale = {"reason": "Leave out the unsubscribed", "content_hash": shown}
    response = client.post(url(broadcast, "reject/"), stale, follow=True)
    assert "changed since you opened it" in response.content.decode()
    assert Broadcast.objects.get(pk=broadcast.pk).state == "pending_review"
    assert client.post(url(broadcast, "reject/"), {"reason": "No"}).status_code == 302
    assert Broadcast.objects.get(pk=broadcast.pk).state == "pending_review"
    current = Broadcast.objects.get(pk=broadcast.pk).content_hash
    client.post(url(broadcast, "reject/"), {"reason": "No", "content_hash": current})
    assert Broadcast.objects.get(pk=broadcast.pk).state == "rejected"


def test_unknown_control_action_is_404(signed_in, member_of, broadcast):
    client = signed_in(member_of(broadcast.tenant, "approver").user)
    assert client.post(url(broadcast, "explode/")).status_code == 404


def test_every_recipient_and_their_values_download_as_approved(
    signed_in, member_of, tenant_a, tenant_b
):
    """One sample does not show what the others receive: an injected value on the last row
    (sorted by address) is in the download, every cell spreadsheet-safe; another tenant's
    admin gets 404."""
    rows = [{"address": f"p{i}@example.com", "variables": {"n": i, "who": "Ana"}} for i in range(3)]
    rows.append(
        {"address": "zz@example.com", "variables": {"n": '=HYPERLINK("http://evil")', "who": "Z"}}
    )
    broadcast = broadcast_create(
        tenant=tenant_a,
        mailbox=make_local_mailbox(tenant_a),
        subject="Delay {{ n }}",
        text="Hello {{ who }}",
        recipients=rows,
    )
    client = signed_in(member_of(tenant_a, "viewer").user)

    page = client.get(url(broadcast)).content.decode()
    response = client.get(url(broadcast, "recipients.csv"))

    assert "Every recipient and their values (CSV, 4 rows)" in page
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert lines == [
        "row,address,n,who",
        "1,p0@example.com,0,Ana",
        "2,p1@example.com,1,Ana",
        "3,p2@example.com,2,Ana",
        '4,zz@example.com,"\'=HYPERLINK(""http://evil"")",Z',
    ]
    outsider = signed_in(member_of(tenant_b, "admin").user)
    foreign = f"/t/{tenant_b.slug}/broadcasts/{broadcast.pk}/recipients.csv"
    assert outsider.get(foreign).status_code == 404


@pytest.mark.parametrize("reason", ["bad\x00reason", "\x00"])
def test_a_reject_reason_that_cannot_be_stored_is_said_and_nothing_changes(
    signed_in, member_of, broadcast, reason
):
    client = signed_in(member_of(broadcast.tenant, "approver").user)

    response = client.post(url(broadcast, "reject/"), {"reason": reason}, follow=True)

    assert response.status_code == 200
    assert "A reason cannot hold" in response.content.decode()
    assert Broadcast.objects.get(pk=broadcast.pk).state == "pending_review"


@pytest.mark.django_db(transaction=True)
def test_the_download_is_the_list_the_approve_button_on_its_page_approves(
    signed_in, member_of, tenant_a, mailbox_factory, sandbox
):
    """The page asks the reviewer to check every recipient in its download, not only the sample,
    and its approve button carries the hash the page was rendered with. The download read
    whatever list the broadcast held when it was fetched: an agent that put other recipients
    back between the page and the download (and the page's list again before the click) had
    the approval accepted, and the customers the reviewer never saw in the download received
    it. The download is now the list of the page's hash, or a refusal."""
    from intents.models import SendIntent
    from intents.sending.fanout import broadcast_run
    from tests.intents.helpers import drain_sends

    mailbox = mailbox_factory(tenant_a)
    good = [{"address": f"p{i}@example.com", "variables": {"n": i}} for i in range(3)]
    bad = [*good[:2], {"address": "victim@example.com", "variables": {"n": "pay here"}}]
    broadcast = broadcast_create(
        tenant=tenant_a, mailbox=mailbox, subject="Delay {{ n }}", text="Hi", recipients=bad
    )
    client = signed_in(member_of(tenant_a, "approver").user)
    page = client.get(url(broadcast)).content.decode()
    shown = broadcast.content_hash
    assert shown in page
    link = page[: page.index('" data-recipients-csv')].rpartition('href="')[2]

    broadcast_replace_recipients(tenant=tenant_a, broadcast_id=broadcast.pk, recipients=good)
    download = client.get(link.replace("&amp;", "&"))
    listed = b"".join(download).decode()
    broadcast_replace_recipients(tenant=tenant_a, broadcast_id=broadcast.pk, recipients=bad)
    client.post(url(broadcast, "approve/"), {"content_hash": shown})
    broadcast_run(broadcast.pk)
    drain_sends()
    keys = set(
        SendIntent.objects.filter(broadcast=broadcast).values_list("idempotency_key", flat=True)
    )
    received = sorted(s["to"][0] for s in sandbox.ledger() if s.get("idempotency_key") in keys)

    assert received == ["p0@example.com", "p1@example.com", "victim@example.com"]
    unseen = [a for a in received if a not in listed and download.status_code != 409]
    assert unseen == []  # was ["victim@example.com"]: sent, never in the download
    assert download.status_code == 409
    assert "changed since you opened it" in listed


@pytest.mark.django_db(transaction=True)
def test_the_sample_is_of_the_hash_the_approve_button_carries(
    signed_in, member_of, tenant_a, mailbox_factory, sandbox
):
    """The page read the broadcast (its hash, which the approve button carries) and then, in
    statements of their own, the sample recipient's row: recipients replaced between the two
    reads (and put back before the click) showed the reviewer the other list's message under
    this hash, and the approval sent what the page had not shown. Here the replacement commits
    just before the sample's read; the page now shows only rows of the hash it carries."""
    from django.db import connection

    from intents.models import SendIntent
    from intents.sending.fanout import broadcast_run
    from tests.intents.helpers import drain_sends, in_thread

    mailbox = mailbox_factory(tenant_a)
    bad = [{"address": "ana@example.com", "variables": {"n": "PAY AT evil.example"}}]
    good = [{"address": "ana@example.com", "variables": {"n": "17"}}]
    broadcast = broadcast_create(
        tenant=tenant_a, mailbox=mailbox, subject="Delay {{ n }}", text="Hi", recipients=bad
    )
    client = signed_in(member_of(tenant_a, "approver").user)
    swapped: list = []

    def swap_before_the_sample(execute, sql, params, many, context):
        if not swapped and 'FROM "intents_broadcastrecipient"' in sql and "position" in sql:
            replace = in_thread(
                lambda: broadcast_replace_recipients(
                    tenant=tenant_a, broadcast_id=broadcast.pk, recipients=good
                ),
                swapped,
            )
            replace.join()
        return execute(sql, params, many, context)

    with connection.execute_wrapper(swap_before_the_sample):
        page = client.get(url(broadcast)).content.decode()
    broadcast_replace_recipients(tenant=tenant_a, broadcast_id=broadcast.pk, recipients=bad)
    client.post(url(broadcast, "approve/"), {"content_hash": broadcast.content_hash})
    broadcast_run(broadcast.pk)
    drain_sends()
    keys = set(
        SendIntent.objects.filter(broadcast=broadcast).values_list("idempotency_key", flat=True)
    )
    sent = [s["subject"] for s in sandbox.ledger() if s.get("idempotency_key") in keys]

    assert len(swapped) == 1
    assert sent == ["Delay PAY AT evil.example"]
    assert "Delay 17" not in page  # was the sample shown above that approve button
    assert "data-approve-form" not in page and "data-broadcast-changed" in page
    # Nor a "filtered out" count of a list it did not read; a way to read it again instead.
    assert "data-filtered" not in page and "data-reload-page" in page


def test_the_filtered_out_count_is_every_skipped_recipient_not_the_rows_listed(
    signed_in, member_of, tenant_a
):
    """Found by an outside probe: the page listed the first 200 filtered-out recipients and
    counted the list, so an approver of a broadcast from a restricted mailbox read "Filtered
    out 200" over 250 recipients that would get nothing (the agent API said 250)."""
    mailbox = make_local_mailbox(tenant_a, policy_mode="allowlist")
    mailbox.allowed_domains = ["example.com"]
    mailbox.save(update_fields=["allowed_domains"])
    rows = [{"address": f"p{i}@elsewhere.test", "variables": {"n": i}} for i in range(250)]
    rows.append({"address": "ana@example.com", "variables": {"n": 0}})
    broadcast = broadcast_create(
        tenant=tenant_a, mailbox=mailbox, subject="Delay {{ n }}", text="Hi", recipients=rows
    )
    client = signed_in(member_of(tenant_a, "approver").user)

    page = client.get(url(broadcast)).content.decode()

    assert 'Filtered out <span class="count">250</span>' in page
    assert "The first 200 are listed." in page
    assert page.count('data-skipped="not_allowed"') == 200


def test_a_sub_address_filtered_out_is_named_with_the_entry_that_covers_it(
    signed_in, member_of, tenant_a
):
    """ana+billing@ reaches ana@'s mailbox, whose complaint covers it: the page says so, naming
    the entry the approver would look for on the suppression list."""
    Suppression.objects.create(tenant=tenant_a, address="ana@example.com", reason="complained")
    Suppression.objects.create(tenant=tenant_a, address="ben@example.com", reason="bounced")
    rows = [
        {"address": a, "variables": {"n": i}}
        for i, a in enumerate(["ana+billing@example.com", "ben@example.com", "ana+x@other.test"])
    ]
    broadcast = broadcast_create(
        tenant=tenant_a,
        mailbox=make_local_mailbox(tenant_a),
        subject="Delay {{ n }}",
        text="Hi",
        recipients=rows,
    )
    client = signed_in(member_of(tenant_a, "approver").user)

    page = client.get(url(broadcast)).content.decode()

    assert 'Filtered out <span class="count">2</span>' in page
    assert "on the suppression list as ana@example.com (complained)" in page
    assert page.count('data-skipped="suppressed"') == 2


def test_an_address_that_is_not_plain_ascii_is_named_letter_by_letter(
    signed_in, member_of, tenant_a
):
    """Found by an outside probe: a broadcast's rows were approved as a list (one sample, the
    download) that shows each address as it is, and "b\u0456lling@example.com", with a
    Cyrillic small i, reads as "billing@example.com", another person's mailbox. A draft's page
    names such letters and the queue's bulk approval leaves such a draft out; the broadcast's
    page named nothing."""
    rows = [
        {"address": "ana@example.com", "variables": {"n": 1}},
        {"address": "b\u0456lling@example.com", "variables": {"n": 2}},
        {"address": "zoe@example.com", "variables": {"n": 3}},
    ]
    broadcast = broadcast_create(
        tenant=tenant_a,
        mailbox=make_local_mailbox(tenant_a),
        subject="Delay {{ n }}",
        text="Hi",
        recipients=rows,
    )
    client = signed_in(member_of(tenant_a, "approver").user)

    page = client.get(url(broadcast)).content.decode()

    assert page.count("data-not-ascii=") == 1
    assert (
        '#2 <span class="mono">b\u0456lling@example.com</span> — Not plain ASCII: it holds '
        "U+0456 CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I"
    ) in page


def test_a_variable_named_like_a_column_of_the_download_is_headed_as_a_placeholder(
    signed_in, member_of, tenant_a
):
    """ "Your parcel to {{ address }}" with a JSON row's variable "address": the download's
    header read "row,address,address", and a reviewer checking the list in a spreadsheet had
    two address columns, one of them the recipients, to tell apart by their contents."""
    broadcast = broadcast_create(
        tenant=tenant_a,
        mailbox=make_local_mailbox(tenant_a),
        subject="Parcel {{ row }}",
        text="Your parcel to {{ Address }}",
        recipients=[
            {"address": "p@example.com", "variables": {"Address": "ceo@example.org", "row": 9}}
        ],
    )
    client = signed_in(member_of(tenant_a, "viewer").user)
    response = client.get(url(broadcast, "recipients.csv"))
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert lines == ["row,address,{{ Address }},{{ row }}", "1,p@example.com,ceo@example.org,9"]


def test_its_author_is_told_before_approving_that_another_person_must(
    signed_in, member_of, tenant_a
):
    """Four-eyes on: the person who posted a broadcast may not approve it. The page offered them
    the Approve button, and only the click said no; it now says so up front, as the draft page
    does, with the button disabled, and still offers Reject. A colleague gets the button."""
    tenant_a.second_approver_on_edit = True
    tenant_a.save(update_fields=["second_approver_on_edit"])
    author = member_of(tenant_a, "approver").user
    broadcast = broadcast_create(
        tenant=tenant_a,
        mailbox=make_local_mailbox(tenant_a),
        subject="Delay {{ n }}",
        text="Hello {{ n }}",
        recipients=[{"address": "p@example.com", "variables": {"n": 1}}],
        actor_user=author,
    )

    page = signed_in(author).get(url(broadcast)).content.decode()

    assert "data-approve-blocked" in page
    assert "You posted this broadcast; this tenant requires another person to approve it." in page
    assert 'data-approve disabled aria-describedby="approve-blocked"' in page
    assert "data-reject" in page
    refused = signed_in(author).post(
        url(broadcast, "approve/"), {"content_hash": broadcast.content_hash}, follow=True
    )
    assert "Someone other than its author must approve" in refused.content.decode()
    assert Broadcast.objects.get(pk=broadcast.pk).state == "pending_review"
    colleague = signed_in(member_of(tenant_a, "approver").user).get(url(broadcast))
    assert "data-approve-blocked" not in colleague.content.decode()
    assert "data-approve>" in colleague.content.decode()


def test_the_page_says_the_pace_its_author_chose_and_how_long_the_list_takes(
    signed_in, member_of, tenant_a
):
    """Found by an outside probe of the agent API: an agent's rate_per_second (down to 0.001,
    one send every 16 minutes) was on no page, so an approver let an urgent notice to 3
    customers take 50 minutes (to 10,000, four months) without knowing it."""
    slow = broadcast_create(
        tenant=tenant_a,
        mailbox=make_local_mailbox(tenant_a),
        subject="Outage {{ n }}",
        text="Hello {{ n }}",
        recipients=[{"address": f"p{i}@example.com", "variables": {"n": i}} for i in range(3)],
        rate_per_second=0.001,
    )
    client = signed_in(member_of(tenant_a, "approver").user)

    page = client.get(url(slow)).content.decode()

    pace = page.split("data-pace>", 1)[1].split("</p>", 1)[0]
    assert "0.001 sends per second" in pace
    assert "its author" in pace
    assert "50 min" in pace


def test_the_page_says_a_broadcast_without_a_pace_of_its_own_goes_at_the_default(
    signed_in, member_of, broadcast, settings
):
    client = signed_in(member_of(broadcast.tenant, "approver").user)

    page = client.get(url(broadcast)).content.decode()

    pace = page.split("data-pace>", 1)[1].split("</p>", 1)[0]
    assert f"{settings.BROADCAST_RATE_PER_SECOND:g} sends per second" in pace
    assert "default" in pace


def test_a_broadcast_older_than_the_first_page_of_the_list_is_reached_from_it(
    signed_in, member_of, tenant_a
):
    """Found by an outside probe: the list showed the newest 100 broadcasts and said nothing of
    the rest, so a broadcast waiting for review (or paused, waiting to be resumed or cancelled)
    behind 100 newer ones, which an agent may post in a minute, was on no page a person could
    open. The list pages back as the outbox does."""
    mailbox = make_local_mailbox(tenant_a)

    def post(name):
        return broadcast_create(
            tenant=tenant_a,
            mailbox=mailbox,
            name=name,
            subject="Notice",
            text="Hello",
            recipients=["p@example.com"],
        )

    oldest = post("Waiting behind the others")
    for i in range(100):
        post(f"Newer {i}")
    client = signed_in(member_of(tenant_a, "approver").user)

    first = client.get(f"/t/{tenant_a.slug}/broadcasts/").content.decode()
    assert f'data-broadcast="{oldest.pk}"' not in first
    older = first.split("data-older-broadcasts")[0].rsplit('href="', 1)[1].split('"')[0]
    second = client.get(f"/t/{tenant_a.slug}/broadcasts/{older.replace('&amp;', '&')}")
    page = second.content.decode()
    assert second.status_code == 200
    assert f'data-broadcast="{oldest.pk}"' in page and "Waiting behind the others" in page
    assert page.count("data-broadcast=") == 1
    assert "data-older-broadcasts" not in page
    for made_up in ("x", "OTk5OTk5OTk5OTk5OTk5OTk5OTk5OQ", "LTE"):  # not base64, 10^27, -1
        again = client.get(f"/t/{tenant_a.slug}/broadcasts/?after={made_up}").content.decode()
        assert "That page link was not valid; showing the newest broadcasts." in again
        assert again.count("data-broadcast=") == 100
