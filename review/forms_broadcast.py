"""The form a person posts a broadcast with: its mailbox (only those the person may decide for),
subject, template body and the recipients as an uploaded CSV or JSON file. The rows themselves
are checked by the intents service, exactly as for the agent API."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from common import strict_json
from common.forms import TextBoxField

# The agent API's limit for recipients_csv too (settings, "Request bodies").
MAX_UPLOAD = settings.BROADCAST_RECIPIENTS_MAX_BYTES
# A list of objects of variables: three levels; room for a file that wraps it, not for more.
MAX_JSON_DEPTH = 32


class BroadcastForm(forms.Form):
    mailbox = forms.TypedChoiceField(coerce=int, label=_("From mailbox"))
    name = forms.CharField(required=False, max_length=200, label=_("Name (for your team)"))
    subject = forms.CharField(max_length=998, label=_("Subject"))
    text = TextBoxField(
        widget=forms.Textarea(attrs={"rows": 10}),
        max_length=1_000_000,
        label=_("Message"),
        help_text=_(
            "A placeholder such as {{ name }} takes each recipient's value of that name; "
            "nothing else is template syntax."
        ),
    )
    recipients = forms.FileField(
        label=_("Recipients (CSV or JSON file)"),
        help_text=_(
            "CSV: a header row with an address (or email) column and one column per "
            'placeholder. JSON: a list of {"address": …, "variables": {…}}.'
        ),
    )

    def __init__(self, *args, mailboxes, **kwargs):
        super().__init__(*args, **kwargs)
        field = self.fields["mailbox"]
        assert isinstance(field, forms.TypedChoiceField)
        field.choices = [(m.pk, m.address) for m in mailboxes]

    def clean_recipients(self) -> dict:
        """The upload as the service takes it: ``{"recipients": [...]}`` for JSON (by the
        file's name or a leading ``[``), ``{"recipients_csv": text}`` otherwise."""
        upload = self.cleaned_data["recipients"]
        if upload.size > MAX_UPLOAD:
            raise forms.ValidationError(
                _("The file is larger than %(n)s MB.") % {"n": MAX_UPLOAD // 1_000_000}
            )
        try:
            text = upload.read().decode("utf-8-sig")
        except UnicodeDecodeError:
            raise forms.ValidationError(_("The file is not UTF-8 text.")) from None
        if upload.name.lower().endswith(".json") or text.lstrip().startswith("["):
            try:
                # Read as the agent API reads its body: Python's json takes NaN and Infinity
                # (they became the values "nan" and "inf" in the customers' messages) and keeps
                # the last of a key named twice, where a person reading the file sees the first.
                rows = strict_json.loads(text, max_depth=MAX_JSON_DEPTH)
            except strict_json.JSONRefused as exc:
                raise forms.ValidationError(_json_refusal(exc)) from None
            if not isinstance(rows, list):
                raise forms.ValidationError(_("The JSON file must hold a list of recipients."))
            return {"recipients": rows}
        return {"recipients_csv": text}


def _json_refusal(exc: strict_json.JSONRefused) -> str:
    if exc.code == "too_deep":
        return gettext("The JSON file nests too deeply.")
    if exc.code == "too_many_values":
        return gettext(
            "The JSON file holds more than %(count)s values: send the recipients as a CSV file."
        ) % {"count": f"{strict_json.MAX_VALUES:,}"}
    if exc.code == "malformed":
        return gettext("The file is not valid JSON (line %(line)s).") % {"line": exc.line}
    # strict_json's reason stays as it says it (English): it names the member it found.
    return gettext("The file is not valid JSON: %(reason)s.") % {"reason": exc.message}
