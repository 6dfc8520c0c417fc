"""The queue's marks of what readers see otherwise are read once per content
(intents.content_marks): a queue page of 50 drafts with megabyte HTML took 40 s on every load,
reading every body through every check again."""

import ast
import importlib
from pathlib import Path

import pytest
from django.core.cache import cache

from intents import services
from intents.content_marks import _RULE_MODULES, ContentMarks, current_content_marks

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


def _project_imports(module_name: str) -> set[str]:
    """The modules of ``common`` and ``intents`` that ``module_name`` imports at its top level
    (models left out: they decide no mark)."""
    source = Path(importlib.import_module(module_name).__file__ or "").read_text()
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {
        name
        for name in names
        if name.split(".")[0] in {"common", "intents"} and not name.startswith("intents.models")
    }


def test_the_rules_digest_covers_every_module_the_marks_are_decided_by():
    """The kept marks are keyed by the digest of the rules' source, so that a release that
    changes a rule never reads marks of the old one. A module the rules import and the digest
    leaves out (intents.html_hidden, which decides what hidden text is) kept the old marks for a
    week after a release that changed it: "nothing to refuse" for content that now has marks,
    and a list approved it."""
    reached = set()
    todo = list(_RULE_MODULES)
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        todo.extend(_project_imports(name))

    assert reached - set(_RULE_MODULES) == set()
