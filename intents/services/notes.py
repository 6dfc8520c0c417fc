"""Internal notes between reviewers on a draft (``DraftNote``): append-only, journaled."""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils.translation import gettext as _

from common.text import unsafe_in_text
from intents import errors
from intents.journal import journal
from intents.models import Draft, DraftNote, DraftVersion, IntentEvent
from intents.policy import NOTE_WRITERS, active_membership
from intents.services.common import active_tenant, key_share, require_standing

log = logging.getLogger("intents.services")


def clean_note(text) -> str:
    """The note's text, or InvalidInput that says what is wrong with it."""
    # LF line endings, as a draft's body (intents.services.content): a browser posts the note
    # box's line breaks as CRLF, while its maxlength counts each as one character, so a note of
    # many lines that the box let in was refused as too long.
    if not isinstance(text, str):
        text = ""
    text = text.replace("\r\n", "\n").replace("\r", "\n").strip()
    if not text:
        raise errors.InvalidInput("note_empty", _("Write something in the note."), "text")
    if len(text) > DraftNote.MAX_LENGTH:
        raise errors.InvalidInput(
            "note_too_long",
            _("A note holds at most %(max)d characters; this one has %(n)d.")
            % {"max": DraftNote.MAX_LENGTH, "n": len(text)},
            "text",
        )
    if "\x00" in text:
        raise errors.InvalidInput(
            "note_unstorable", _("A note cannot hold NUL characters."), "text"
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise errors.InvalidInput(
            "note_unstorable", _("A note cannot hold unpaired UTF-16 surrogates."), "text"
        ) from None
    # The team reads it on the draft page and in the journal: a control character or a
    # bidirectional control makes it show as other words (common.text.unsafe_in_text).
    if found := unsafe_in_text(text):
        raise errors.InvalidInput(
            "note_invalid",
            _("A note cannot hold the control character %(character)s.") % {"character": found},
            "text",
        )
    return text


def draft_note_add(*, tenant, draft_id, author, text) -> DraftNote:
    """Add an internal note to a draft (in any state: a note may explain a rejection or a send
    after the fact). Never sent, never part of the content hash."""
    tenant = active_tenant(tenant)
    text = clean_note(text)
    with transaction.atomic():
        require_standing(tenant, None)
        membership = active_membership(tenant=tenant, user=author)
        # A member deactivated while their page was open (the request passed the membership
        # check as it began) was told that viewers cannot write notes.
        if membership is None:
            raise errors.NoRight(
                message=_("You are no longer a member of %(tenant)s, so your note was not saved.")
                % {"tenant": tenant.name}
            )
        if membership.role not in NOTE_WRITERS:
            raise errors.NoRight(message=_("Viewers can read notes but not write them."))
        draft = _tenant_draft(tenant, draft_id)
        _require_bodies_kept(draft)
        note = DraftNote.objects.create(tenant=tenant, draft=draft, author=author, text=text)
        journal(
            tenant=tenant,
            draft=draft,
            action="draft.note_added",
            actor_kind=IntentEvent.Actor.PERSON,
            actor_user=author,
            data={"note_id": note.pk, "length": len(text)},
        )
    log.info(
        "intents.draft.note_added",
        extra={"tenant_id": tenant.pk, "draft_id": draft.pk, "note_id": note.pk},
    )
    note.refresh_from_db(fields=["created_at"])
    return note


def _require_bodies_kept(draft: Draft) -> None:
    """Refuse a note on a draft whose bodies the retention policy purged: notes may quote the
    customer and go with the bodies (``intents.retention``), and the purge never comes back to a
    purged draft, so a note added after it was kept for good. The draft's row is read FOR KEY
    SHARE first: a purge holding it (FOR UPDATE) is waited for and its versions read after it,
    and a purge that starts later skips the draft until this note is in, then takes it too."""
    key_share(Draft, draft.pk, "id")
    if DraftVersion.objects.filter(draft=draft, body_purged_at__isnull=False).exists():
        raise errors.InvalidInput(
            "note_after_purge",
            _(
                "The retention policy purged this draft's bodies and its notes; "
                "a note cannot be added any more."
            ),
            "text",
        )


def _tenant_draft(tenant, draft_id) -> Draft:
    try:
        pk = int(draft_id)
    except (TypeError, ValueError):
        raise errors.NotFound("not_found", "No such draft.") from None
    found = Draft.objects.filter(tenant=tenant, pk=pk).first()
    if found is None:
        raise errors.NotFound("not_found", "No such draft.")
    return found
