"""The queue's marks of what readers see otherwise are read once per content
(intents.content_marks): a queue page of 50 drafts with megabyte HTML took 40 s on every load,
reading every body through every check again."""

import pytest
from django.core.cache import cache

from intents import services
from intents.content_marks import ContentMarks, current_content_marks

pytestmark = pytest.mark.django_db

MISLEADING = '<p><a href="https://evil.test/pay">https://bank.example/pay</a></p>'


@pytest.fixture(autouse=True)
def empty_marks():
    cache.clear()
    yield
    cache.clear()


def test_a_versions_marks_are_read_once_and_then_kept(
    tenant_a, mailbox_a, make_draft, django_assert_num_queries
):
    drafts = [make_draft(mailbox_a, html=MISLEADING) for _ in range(3)]
    ids = [d.pk for d in drafts]

    with django_assert_num_queries(2):  # the versions' hashes, then the bodies not kept
        first = current_content_marks(tenant=tenant_a, draft_ids=ids)
    with django_assert_num_queries(1):  # the hashes only: no body is read again
        again = current_content_marks(tenant=tenant_a, draft_ids=ids)

    assert first == again
    assert all(mark.misleading_links for mark in first.values()) and len(first) == 3


def test_a_new_version_is_read_for_its_own_content(tenant_a, mailbox_a, make_draft, admin_a):
    draft = make_draft(mailbox_a, html="<p>Your refund is on its way.</p>")
    before = current_content_marks(tenant=tenant_a, draft_ids=[draft.pk])[draft.pk]

    services.draft_add_version(
        tenant=tenant_a,
        draft_id=draft.pk,
        to=["customer@example.com"],
        cc=[],
        bcc=[],
        subject="Your refund",
        text="Your refund is on its way.",
        html=MISLEADING,
        actor_user=admin_a.user,
    )
    after = current_content_marks(tenant=tenant_a, draft_ids=[draft.pk])[draft.pk]

    assert before == ContentMarks()
    assert after.misleading_links and not after.invisible_characters


def test_a_version_written_has_its_marks_kept_and_the_queue_reads_no_body_of_it(
    tenant_a, mailbox_a, make_draft, django_capture_on_commit_callbacks, django_assert_num_queries
):
    with django_capture_on_commit_callbacks(execute=True):
        draft = make_draft(mailbox_a, html=MISLEADING)

    with django_assert_num_queries(1):  # the versions' hashes only
        marks = current_content_marks(tenant=tenant_a, draft_ids=[draft.pk])

    assert marks[draft.pk].misleading_links
