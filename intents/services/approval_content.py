"""What an approval from a list refuses in a version's own content, decided before the
approval's transaction.

An approval from a list (the queue's bulk approval) refuses HTML whose CSS shows it otherwise to
some readers, links that lead elsewhere than they show, characters nobody sees and domains that
read as another: only the draft's page names them (``approval._require_what_only_the_page_shows``).
Those checks read whole bodies in Python, about a second per megabyte of HTML: run under the
draft's lock, the answered message's and the tenant's send births (``send_births_wait``), a list
of 50 large drafts held them for tens of seconds, and other reviewers and the tenant's send stops
waited. They depend on the content alone, and a version's ``content_hash`` covers its subject,
text and HTML exactly (as stored: LF line endings). So ``named_content_verdict`` reads the
version the approver named (number and hash) without a lock, before the transaction, and the
transaction applies its verdict only to a current version of that same hash, after its stale
check: the content checked is the content approved.

The marks kept per content (``intents.content_marks``, the queue's) answer "nothing to refuse"
without reading a body; a mark that says "something" has its details read, so the refusal names
the links, characters, domains and looks as precisely as the page.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.text import get_text_list
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from intents import errors
from intents.content_marks import ContentMarks, keep_marks, kept_marks
from intents.html_links import misleading_links
from intents.html_styles import READER_LOOKS, reader_looks
from intents.models import Draft, DraftVersion
from intents.policy import invisible_in_content, lookalike_hosts_in_content


@dataclass(frozen=True)
class ContentVerdict:
    """What the content of ``content_hash`` refuses in an approval from a list (None: nothing)."""

    content_hash: str
    refusal: errors.DraftError | None = None


def named_content_verdict(*, tenant, draft_id, version, content_hash) -> ContentVerdict | None:
    """The verdict on the version the approver named (its number and hash), read without a lock,
    outside any transaction; None when it is not the draft's current version of a pending draft
    now (the approval's transaction refuses it, under the lock, as it did before)."""
    try:
        draft_id, number = int(draft_id), int(str(version))
    except (TypeError, ValueError):
        return None
    named = DraftVersion.objects.filter(
        tenant=tenant,
        draft_id=draft_id,
        number=number,
        content_hash=content_hash,
        draft__current_version=number,
        draft__status=Draft.Status.PENDING,
    )
    marks = kept_marks(content_hash)
    if marks == ContentMarks():
        return ContentVerdict(content_hash) if named.exists() else None
    current = named.only("content_hash", "subject", "text", "html").first()
    if current is None:
        return None
    return content_verdict(current, marks)


def content_verdict(current: DraftVersion, marks: ContentMarks | None = None) -> ContentVerdict:
    """The verdict on one version's content: the checks its marks (read now and kept when none
    are given) say something about, in the order the page names them."""
    if marks is None:
        marks = keep_marks(current)
    try:
        if marks.reader_looks:
            _require_one_look(current)
        if marks.misleading_links:
            _require_links_that_lead_where_they_show(current)
        if marks.invisible_characters:
            _require_visible_characters(current)
        if marks.lookalike_hosts:
            _require_plain_hosts(current)
    except errors.DraftError as refusal:
        return ContentVerdict(current.content_hash, refusal)
    return ContentVerdict(current.content_hash)


def _require_one_look(current: DraftVersion) -> None:
    looks = reader_looks(current.html)
    if not looks:
        return
    raise errors.ReaderDependentStyles(
        message=_(
            "The HTML of this draft shows otherwise to some readers (%(looks)s): open the "
            "draft, look at it as they will, and approve it there."
        )
        % {"looks": get_text_list([str(READER_LOOKS[look]) for look in looks], _("and"))}
    )


def _require_links_that_lead_where_they_show(current: DraftVersion) -> None:
    misleading = misleading_links(current.html)
    if not misleading:
        return
    named = "; ".join(f"{link.text[:80] or '…'} → {link.target[:200]}" for link in misleading[:3])
    raise errors.MisleadingLink(
        message=ngettext(
            "A link of this draft's HTML shows one address and leads elsewhere, or runs or "
            "carries something (%(links)s): open the draft, which lists where each link leads, "
            "and approve it there.",
            "%(count)d links of this draft's HTML show one address and lead elsewhere, or run or "
            "carry something (%(links)s): open the draft, which lists where each link leads, "
            "and approve it there.",
            len(misleading),
        )
        % {"links": named, "count": len(misleading)}
    )


def _require_visible_characters(current: DraftVersion) -> None:
    found = invisible_in_content(subject=current.subject, text=current.text, html=current.html)
    if not found:
        return
    raise errors.InvisibleCharacters(
        message=_(
            "This draft holds characters nobody sees, or that change the order of what is "
            "shown (%(found)s): open the draft, which names them, and approve it there."
        )
        % {"found": "; ".join(f"{field}: {named}" for field, named in found.items())}
    )


def _require_plain_hosts(current: DraftVersion) -> None:
    found = lookalike_hosts_in_content(
        subject=current.subject, text=current.text, html=current.html
    )
    if not found:
        return
    names = list(dict.fromkeys(host.name for hosts in found.values() for host in hosts))
    raise errors.LookalikeHost(
        message=ngettext(
            "This draft names a domain that can look exactly like another (%(names)s), and "
            "mail clients make a link of it: open the draft, which names its letters, and "
            "approve it there.",
            "This draft names %(count)d domains that can look exactly like others (%(names)s), "
            "and mail clients make links of them: open the draft, which names their letters, "
            "and approve it there.",
            len(names),
        )
        % {"names": ", ".join(name[:200] for name in names[:3]), "count": len(names)}
    )
