"""Form fields shared by the staff pages (review, console)."""

from __future__ import annotations

from django import forms

from common.addresses import MAX_ADDRESS_LENGTH, stray_character_refusal


class TextBoxField(forms.CharField):
    """A text box's text with its line breaks as LF before its length is checked: the box's
    ``maxlength`` counts a line break as one character and the browser posts it as CRLF, so a
    text of many lines that the box let in was refused as too long (the services count and
    store LF)."""

    def to_python(self, value):
        value = super().to_python(value)
        return value.replace("\r\n", "\n").replace("\r", "\n") if isinstance(value, str) else value


class AddressField(forms.CharField):
    """One email address as a person types it, checked by the service that stores it
    (``common.addresses.normalize_address``, whose refusal names the character at fault), not
    by Django's EmailField: that refused letters beyond ASCII before the @ sign, which a
    draft is sent to, and named no character of what it refused. Not stripped either: a line
    break, a tab or a no-break space around the address is refused naming it
    (``stray_character_refusal``), as a draft's recipient is; plain spaces pass."""

    def __init__(self, **kwargs):
        kwargs.setdefault("max_length", MAX_ADDRESS_LENGTH)
        super().__init__(strip=False, **kwargs)

    def to_python(self, value):
        if isinstance(value, str) and (
            refusal := stray_character_refusal(value, field=str(self.label or ""))
        ):
            raise forms.ValidationError(refusal, code="invalid")
        value = super().to_python(value)
        return value.strip(" ") if isinstance(value, str) else value
