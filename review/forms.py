"""Input parsing for the review and outbox pages. Business rules live in intents.services."""

from __future__ import annotations

import re

from django import forms
from django.core.validators import ProhibitNullCharactersValidator
from django.http import QueryDict
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from common.addresses import stray_character_in
from common.forms import TextBoxField
from intents.selectors.queue import AGE_CHOICES, DEFAULT_SORT, QUEUE_SORTS, QueueFilter

# A stored content hash: bare hex (scheme 1) or "N:" + hex (later schemes, intents/hashing.py).
HASH_RE = re.compile(r"^(?:[1-9][0-9]{0,2}:)?[0-9a-f]{64}$")
# The most message ids a page carries as seen: the thread's ten newest and every message the
# approval or release asks about (webhooks.selectors.customer_messages_after: at most 100). At 50,
# a customer who wrote 51 follow-ups made the draft impossible to approve.
MESSAGES_SEEN_MOST = 120
MESSAGES_SEEN_RE = re.compile(
    rf"^(?:[1-9][0-9]{{0,18}}(?:,[1-9][0-9]{{0,18}}){{0,{MESSAGES_SEEN_MOST - 1}}})?$"
)
ITEM_RE = re.compile(r"^(\d{1,18}):(\d{1,9}):((?:[1-9][0-9]{0,2}:)?[0-9a-f]{64})$")
ADDRESS_SPLIT = re.compile(r"[\s,;]+")


class QueueFilterForm(forms.Form):
    # The labels name a refused filter in the page's note of what it did not understand.
    mailbox = forms.TypedChoiceField(
        required=False, coerce=int, empty_value=None, label=_("Mailbox")
    )
    agent = forms.TypedChoiceField(required=False, coerce=int, empty_value=None, label=_("Agent"))
    age = forms.ChoiceField(choices=AGE_CHOICES, required=False, label=_("Age"))
    warnings = forms.BooleanField(required=False, label=_("Only drafts with recipients to check"))
    q = forms.CharField(required=False, max_length=200, label=_("Search"))
    view = forms.ChoiceField(
        choices=[
            ("", pgettext_lazy("queue view", "All")),
            ("mine", _("Mine")),
            ("unassigned", _("Unassigned")),
            ("escalated", _("Escalated")),
        ],
        required=False,
    )
    sort = forms.ChoiceField(
        choices=[(key, sort.label) for key, sort in QUEUE_SORTS.items()],
        required=False,
        label=_("Sort"),
    )

    def __init__(self, *args, mailboxes, agents, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["mailbox"].choices = [("", _("All mailboxes"))] + [
            (m.pk, m.address) for m in mailboxes
        ]
        self.fields["agent"].choices = [("", _("All agents"))] + [(a.pk, a.name) for a in agents]

    def queue_sort(self) -> str:
        if not self.is_bound or not self.is_valid():
            return DEFAULT_SORT
        return self.cleaned_data["sort"] or DEFAULT_SORT

    def queue_filter(self) -> QueueFilter:
        if not self.is_bound or not self.is_valid():
            return QueueFilter()
        data = self.cleaned_data
        return QueueFilter(
            mailbox=data["mailbox"],
            agent=data["agent"],
            age=data["age"] or "",
            warnings=data["warnings"],
            q=data["q"].strip(),
            view=data["view"] or "",
        )


def message_ids(value: str) -> frozenset[int]:
    """The ids of a valid ``messages_seen`` field (MESSAGES_SEEN_RE)."""
    return frozenset(int(n) for n in value.split(",")) if value else frozenset()


class ApproveForm(forms.Form):
    version = forms.IntegerField(min_value=1)
    content_hash = forms.RegexField(regex=HASH_RE)
    # The ids of the customer's messages the page showed (at most the page's ten), comma-separated.
    messages_seen = forms.RegexField(regex=MESSAGES_SEEN_RE, required=False)
    next = forms.BooleanField(required=False)

    def clean_messages_seen(self) -> frozenset[int]:
        return message_ids(self.cleaned_data["messages_seen"])


class ReleaseForm(forms.Form):
    # The ids of the customer's messages the send's page showed, comma-separated (ApproveForm's).
    messages_seen = forms.RegexField(regex=MESSAGES_SEEN_RE, required=False)

    def clean_messages_seen(self) -> frozenset[int]:
        return message_ids(self.cleaned_data["messages_seen"])


class RecipientsField(forms.CharField):
    """Addresses as a person types them, separated by commas or any spaces. A line break or a
    control character (``stray_character_in``) is refused, not taken for a separator: no one
    types one in a text field, and the agent API refuses it too."""

    def to_python(self, value):
        if isinstance(value, str) and (found := stray_character_in(value, typed=True)):
            raise forms.ValidationError(
                _(
                    "This field holds %(char)s, which no address holds: separate addresses "
                    "with commas or spaces."
                ),
                code="invalid",
                params={"char": found},
            )
        return super().to_python(value)


def _addresses(value: str) -> list[str]:
    return [a for a in ADDRESS_SPLIT.split(value or "") if a]


class EditForm(forms.Form):
    base_version = forms.IntegerField(
        min_value=1,
        widget=forms.HiddenInput,
        error_messages=dict.fromkeys(
            ("required", "invalid", "min_value"),
            _("The form did not say which version you edited; open the edit page again."),
        ),
    )
    to = RecipientsField(
        max_length=10000, help_text=_("Separate addresses with commas."), label=_("To")
    )
    cc = RecipientsField(
        max_length=10000, required=False, label=pgettext_lazy("recipient field", "Cc")
    )
    bcc = RecipientsField(
        max_length=10000, required=False, label=pgettext_lazy("recipient field", "Bcc")
    )
    subject = forms.CharField(max_length=998, label=_("Subject"))
    text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 14}), required=False, strip=False, label=_("Text")
    )
    html = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 8, "class": "mono"}),
        required=False,
        strip=False,
        label="HTML",
    )

    @classmethod
    def of_version(cls, version) -> EditForm:
        """The form filled with a version, based on it."""
        return cls(
            initial={
                "base_version": version.number,
                "to": ", ".join(version.to),
                "cc": ", ".join(version.cc),
                "bcc": ", ".join(version.bcc),
                "subject": version.subject,
                "text": version.text,
                "html": version.html,
            }
        )

    def clean(self):
        data = super().clean()
        for name in ("to", "cc", "bcc"):
            data[f"{name}_list"] = _addresses(data.get(name, ""))
        return data


class HtmlPreviewForm(forms.Form):
    """The edit form's HTML, posted alone to the editor's preview. A CharField refuses a NUL
    with the words the edit form's save uses."""

    html = forms.CharField(required=False, strip=False)


class RejectForm(forms.Form):
    reason = TextBoxField(max_length=2000, widget=forms.Textarea(attrs={"rows": 3}))
    # The version the page showed: a version added since refuses the rejection.
    version = forms.IntegerField(min_value=1)


QUEUE_PLACE = ("view", "q", "mailbox", "agent", "age", "warnings", "sort", "after", "before")


def queue_place(raw: str) -> str:
    """The queue's query string (filters, order, page cursor) that a bulk approval returns to,
    rebuilt from the known keys only: what comes back is always a query of this tenant's queue
    (the path is ours; nothing of the input can name another host, path or tenant)."""
    given = QueryDict(raw[:2000])
    kept = QueryDict(mutable=True)
    for key in QUEUE_PLACE:
        value = given.get(key, "")
        if value:
            kept[key] = value[:200]
    return kept.urlencode()


# Four queue pages (QUEUE_PAGE): more is a hand-made post, refused whole rather than cut.
MAX_BULK_ITEMS = 200


class BulkApproveForm(forms.Form):
    def __init__(self, data):
        super().__init__(data)
        self.raw_items = data.getlist("item") if hasattr(data, "getlist") else []

    def clean(self):
        if len(self.raw_items) > MAX_BULK_ITEMS:
            # The drafts past the limit were left out without a word: the page said how many
            # were approved, and nothing of the others.
            raise forms.ValidationError(
                _(
                    "At most %(most)d drafts at a time; %(count)d were selected. Nothing was approved."
                )
                % {"most": MAX_BULK_ITEMS, "count": len(self.raw_items)}
            )
        items = []
        for raw in self.raw_items:
            match = ITEM_RE.match(raw)
            if match is None:
                raise forms.ValidationError(
                    _("A selected draft was not understood; reload the page.")
                )
            items.append((int(match[1]), int(match[2]), match[3]))
        if not items:
            raise forms.ValidationError(_("Select at least one draft to approve."))
        return {"items": items}


class CancelForm(forms.Form):
    reason = TextBoxField(max_length=2000, required=False)


class ResolveForm(forms.Form):
    provider_message_id = forms.CharField(max_length=998, label=_("Provider message id"))
    evidence = TextBoxField(
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 3}),
        label=_("Evidence"),
        help_text=_(
            "Where you saw that it was sent (the recipient's copy, the provider console…)."
        ),
    )


class ReopenForm(forms.Form):
    reason = TextBoxField(
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        label=_("Why send it again"),
        help_text=_("Kept in the journal with your name."),
    )


class NoteForm(forms.Form):
    # The service checks the length, NUL and surrogates with the messages the page shows;
    # the form only keeps an absurd post from being read whole.
    text = forms.CharField(required=False, strip=False, max_length=20_000)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # A CharField refuses NUL itself, before the service is asked: the page then said only
        # "could not be read" and dropped the person's text.
        text = self.fields["text"]
        text.validators = [
            v for v in text.validators if not isinstance(v, ProhibitNullCharactersValidator)
        ]
