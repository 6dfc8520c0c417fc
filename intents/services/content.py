"""Validation and normalisation of draft content: recipients, subject, bodies, the answered
message of a reply. What is stored is exactly what will be sent and what the hash covers."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

from django.utils.translation import gettext as _

from common.addresses import same_recipient_key, stray_character_refusal
from common.text import control_in, nothing_visible
from intents import errors
from intents.models import Draft
from intents.policy import normalize_address, recipient_problems
from mailboxes import provider
from mailboxes.headers import encoded_word_in, line_break_in

# The inbound-mail table belongs to webhooks. Reading it here points intents at webhooks, against
# the write direction (webhooks -> intents), but webhooks.selectors is a leaf (it imports only
# webhooks.models), so no import cycle can form; a reply must answer a message its mailbox
# received, and that fact lives nowhere else.
from webhooks.models import MESSAGE_ID_BYTES
from webhooks.selectors import inbound_message

MAX_RECIPIENTS = 50
MAX_SUBJECT = 998
MAX_BODY = 1_000_000
MAX_PROVENANCE_BYTES = 16_384
MAX_PROVENANCE_DEPTH = 32
PRIORITY_RANGE = (-100, 100)


def _address_list(value, field: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Iterable):
        raise errors.InvalidInput("invalid", f"{field} must be a list of addresses.", field=field)
    items = list(value)
    for item in items:
        if not isinstance(item, str):
            raise errors.InvalidInput(
                "recipient_invalid", f"{field} must contain only addresses.", field=field
            )
    return items


def _lf_line_endings(body: str) -> str:
    # Browsers submit textareas with CRLF (the HTML form encoding), agents send what their
    # platform writes. One form, before hashing, so a body nobody changed keeps its hash and the
    # word diff marks only what a person changed (DESIGN.md: "hashed with normalised line endings").
    return body.replace("\r\n", "\n").replace("\r", "\n")


def body_as_stored(field: str, value: str) -> str:
    """A text or HTML body as a version stores it (LF line endings), or InvalidInput naming
    ``field`` when it is too long. The editor's preview shows the HTML through this too."""
    value = _lf_line_endings(value)
    if len(value) > MAX_BODY:
        raise errors.InvalidInput(
            "body_too_long",
            _("The %(field)s body is longer than %(n)s characters.")
            % {"field": field, "n": MAX_BODY},
            field,
        )
    return value


def refuse_recipient_problems(tenant, mailbox, field: str, addresses: list[str]) -> None:
    """RecipientRefused naming the first address of ``field`` the policy refuses, if any."""
    problems = recipient_problems(tenant=tenant, mailbox=mailbox, addresses=addresses)
    if problems:
        problem = problems[0]
        raise errors.RecipientRefused(
            problem.error_code, problem.message, field=field, address=problem.address
        )


def _refuse_stray_character(field: str, written: str) -> None:
    """Refuse a recipient holding a line break, a control character or white space other than
    a space (``stray_character_refusal``), which ``normalize_address`` would strip unsaid."""
    if refusal := stray_character_refusal(written, field=field):
        raise errors.InvalidInput("recipient_invalid", refusal, field)


def _refuse_named_twice(
    seen: dict[str, tuple[str, str]], field: str, written: str, address: str
) -> None:
    """Note ``address`` (normalised; ``written`` as given, white space left out) in ``field``,
    or refuse it if to, cc or bcc named the same recipient before (``same_recipient_key``, the
    rule of a broadcast's rows). Refused, not merged: keeping one of them (as drafts did) sent to
    other lists than the author wrote, and which spelling and which list they meant is theirs
    to say; the refusal names both."""
    key = same_recipient_key(address)
    if key not in seen:
        seen[key] = (field, written)
        return
    first_field, first = seen[key]
    if first != written:
        problem = _("%(address)s in %(field)s is the same address as %(first)s in %(first_field)s.")
    elif first_field == field:
        problem = _("%(address)s is in %(field)s twice.")
    else:
        problem = _("%(address)s is in both %(first_field)s and %(field)s.")
    problem %= {"address": written, "field": field, "first": first, "first_field": first_field}
    advice = _("Name each recipient once across to, cc and bcc.")
    raise errors.RecipientRefused(
        "duplicate_recipient",
        f"{problem} {advice}",
        field=field,
        address=address,
    )


def _written_form(subject: str) -> str:
    """A subject as its characters read: stripped, in Unicode's composed form (NFC). An agent
    that writes out a reply's subject may change neither, but may well write "é" composed where
    the customer's client wrote e and a combining accent; it was refused as another subject, in
    a message quoting the same characters. Only for that comparison: the draft keeps the
    subject AgentMail will send, the customer's own form."""
    return unicodedata.normalize("NFC", subject.strip())


def _check_reply_subject(reply_subject: str) -> None:
    """AgentMail sets a reply's subject from the message it answers, so one that could not be
    sent is refused naming ``in_reply_to`` (the agent cannot change a subject it never sent):
    the customer's subject was too long for "Re: ", or held a line break."""
    if len(reply_subject) > MAX_SUBJECT:
        _refuse_reply_subject(_("it would be longer than %(n)s characters") % {"n": MAX_SUBJECT})
    if line_break := line_break_in(reply_subject) or control_in(reply_subject):
        _refuse_reply_subject(_("it would hold %(what)s") % {"what": line_break})
    if word := encoded_word_in(reply_subject):
        _refuse_reply_subject(
            _("it would hold the encoded word %(word)s, which a mail client shows decoded")
            % {"word": word}
        )


def _refuse_reply_subject(problem: str) -> None:
    raise errors.InvalidInput(
        "reply_subject_invalid",
        _(
            "The message this answers has a subject AgentMail cannot reply with (%(problem)s). "
            "Write a new message instead of a reply."
        )
        % {"problem": problem},
        "in_reply_to",
    )


def reply_subject_of(answered) -> str:
    """The subject AgentMail gives a reply to the customer's message ``answered``. Refused when
    what we hold of it is not that subject: it held a NUL or an unpaired surrogate, which the
    receiver could only store replaced (U+FFFD), and AgentMail would send the original."""
    if answered.subject_replaced:
        _refuse_reply_subject(_("it held a NUL or an unpaired surrogate, shown replaced by U+FFFD"))
    return provider.reply_subject(answered.subject)


def clean_content(
    *, tenant, mailbox, to, cc, bcc, subject, text, html, reply_subject: str | None = None
) -> dict:
    """Validated, normalised draft content, or a DraftError naming the field and address at fault.

    Addresses are stored in their one form (``normalize_address``: lower-cased, the domain in
    ASCII), so the stored version is exactly what will be sent and what the hash covers; a
    recipient named twice across to, cc and bcc is refused (``_refuse_named_twice``). For a
    reply, ``reply_subject`` is the subject AgentMail will give it; it replaces ``subject``, which
    may be left out or written out but not different.
    """
    lists = {"to": _address_list(to, "to"), "cc": _address_list(cc, "cc")}
    lists["bcc"] = _address_list(bcc, "bcc")
    seen: dict[str, tuple[str, str]] = {}
    cleaned: dict[str, list[str]] = {}
    for field, addresses in lists.items():
        refuse_recipient_problems(tenant, mailbox, field, addresses)
        out: list[str] = []
        for index, written in enumerate(addresses):
            _refuse_stray_character(f"{field}[{index}]", written)
            normalised = normalize_address(written)
            _refuse_named_twice(seen, field, written.strip(), normalised)
            out.append(normalised)
        cleaned[field] = out
    if not cleaned["to"]:
        raise errors.InvalidInput("no_recipients", _("A draft needs at least one recipient."), "to")
    if len(seen) > MAX_RECIPIENTS:
        raise errors.InvalidInput(
            "too_many_recipients",
            _("A draft may have at most %(n)s recipients.") % {"n": MAX_RECIPIENTS},
            "to",
        )
    if reply_subject is not None:
        if isinstance(subject, str) and _written_form(subject) not in (
            "",
            _written_form(reply_subject),
        ):
            raise errors.InvalidInput(
                "subject_not_reply_subject",
                _(
                    "A reply's subject is set by AgentMail from the message it answers: "
                    '"%(subject)s". Leave the subject out, or send exactly that.'
                )
                % {"subject": reply_subject},
                "subject",
            )
        _check_reply_subject(reply_subject)
        subject = reply_subject
    if not isinstance(subject, str) or not subject.strip():
        raise errors.InvalidInput("subject_required", _("A subject is required."), "subject")
    refuse_unseen_subject(subject)
    if len(subject) > MAX_SUBJECT:
        raise errors.InvalidInput(
            "subject_too_long",
            _("The subject is longer than %(n)s characters.") % {"n": MAX_SUBJECT},
            "subject",
        )
    if line_break := line_break_in(subject):
        message = _("The subject must be a single line; it holds %(what)s.") % {"what": line_break}
        raise errors.InvalidInput("subject_invalid", message, "subject")
    if control := control_in(subject):
        message = _("The subject cannot hold the control character %(what)s.") % {"what": control}
        raise errors.InvalidInput("subject_invalid", message, "subject")
    if word := encoded_word_in(subject):
        message = _(
            "The subject cannot hold the encoded word %(word)s: a mail client shows it decoded, "
            "as other words than the ones approved. Write the text itself."
        ) % {"word": word}
        raise errors.InvalidInput("subject_invalid", message, "subject")
    text = text or ""
    html = html or ""
    if not isinstance(text, str) or not isinstance(html, str):
        raise errors.InvalidInput("body_invalid", _("The body must be text."), "text")
    text, html = body_as_stored("text", text), body_as_stored("html", html)
    if not text.strip() and not html.strip():
        raise errors.InvalidInput("body_required", _("A text or HTML body is required."), "text")
    refuse_unseen_body(text, html)
    subject = subject if reply_subject is not None else subject.strip()
    return {**cleaned, "subject": subject, "text": text, "html": html}


def refuse_unseen_subject(subject: str) -> None:
    """Refuse a subject made only of characters nobody sees (``common.text.nothing_visible``):
    the reviewer would approve, and the customer receive, a message whose subject shows nothing.
    As a blank one, the same code, naming what it holds."""
    if (unseen := nothing_visible(subject)) is not None:
        raise errors.InvalidInput(
            "subject_required",
            _("A subject is required: this one holds only characters nobody sees (%(what)s).")
            % {"what": unseen},
            "subject",
        )


def refuse_unseen_body(text: str, html: str) -> None:
    """Refuse a text body made only of characters nobody sees when there is no HTML body: as a
    subject (``refuse_unseen_subject``), it would reach the customer as a message showing
    nothing. An HTML body is what a mail client shows; the text beside it is its fallback."""
    if not html.strip() and (unseen := nothing_visible(text)) is not None:
        raise errors.InvalidInput(
            "body_required",
            _("A body is required: this one holds only characters nobody sees (%(what)s).")
            % {"what": unseen},
            "text",
        )


def answered_message(*, tenant, mailbox, in_reply_to: str, thread_id: str):
    """The customer's message a reply answers. AgentMail's reply route takes the thread and the
    subject from it, so it must have come into this mailbox (and this thread, when one is named):
    otherwise the approver would see one conversation and the customer of another get the reply.
    """
    _refuse_unrecordable_id(in_reply_to)
    message = inbound_message(tenant=tenant, mailbox=mailbox, message_id=in_reply_to)
    if message is None:
        _refuse_written_otherwise(tenant, mailbox, in_reply_to)
        raise errors.InvalidInput(
            "in_reply_to_unknown",
            f"in_reply_to {in_reply_to} is not a message received by {mailbox.address} "
            "(if it arrived only just now, retry in a few seconds).",
            "in_reply_to",
        )
    if thread_id and message.thread_id != thread_id:
        raise errors.InvalidInput(
            "in_reply_to_other_thread",
            f"in_reply_to {in_reply_to} is not in thread {thread_id}.",
            "in_reply_to",
        )
    return message


def _refuse_unrecordable_id(in_reply_to: str) -> None:
    """Refuse a message id longer than the receiver stores whole (``MESSAGE_ID_BYTES`` of
    UTF-8): such a message is recorded under a cut id, which no reply naming it can equal. It
    was refused as not received yet, "retry in a few seconds", and the agent retried for ever."""
    size = len(in_reply_to.encode("utf-8", "surrogatepass"))
    if size <= MESSAGE_ID_BYTES:
        return
    raise errors.InvalidInput(
        "in_reply_to_too_long",
        f"in_reply_to is {size} bytes in UTF-8, more than the {MESSAGE_ID_BYTES} a received "
        "message's id is recorded with: a reply to that message cannot be written. Write the "
        "answer as a new message (no in_reply_to).",
        "in_reply_to",
    )


def _refuse_written_otherwise(tenant, mailbox, in_reply_to: str) -> None:
    """Refuse a Message-ID this mailbox received written with its angle brackets left out (as
    mail libraries give it) or added, naming how it is written. Compared exactly, never
    matched: "unknown, retry in a few seconds" had an agent retry for ever."""
    bare = in_reply_to[1:-1] if in_reply_to[:1] == "<" and in_reply_to[-1:] == ">" else None
    other = bare if bare is not None else f"<{in_reply_to}>"
    if not other or inbound_message(tenant=tenant, mailbox=mailbox, message_id=other) is None:
        return
    raise errors.InvalidInput(
        "in_reply_to_written_otherwise",
        f"in_reply_to {in_reply_to} is not a message received by {mailbox.address}, which "
        f"received {other}: give the message id exactly as AgentMail gives it.",
        "in_reply_to",
    )


def draft_reply_subject(tenant, draft: Draft) -> str | None:
    """The subject AgentMail will give this draft's reply; None for a new message."""
    if not draft.in_reply_to:
        return None
    answered = answered_message(
        tenant=tenant,
        mailbox=draft.mailbox,
        in_reply_to=draft.in_reply_to,
        thread_id=draft.thread_id,
    )
    return reply_subject_of(answered)
