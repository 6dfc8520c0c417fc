"""Form fields shared by the staff pages (review, console)."""

from __future__ import annotations

from django import forms


class TextBoxField(forms.CharField):
    """A text box's text with its line breaks as LF before its length is checked: the box's
    ``maxlength`` counts a line break as one character and the browser posts it as CRLF, so a
    text of many lines that the box let in was refused as too long (the services count and
    store LF)."""

    def to_python(self, value):
        value = super().to_python(value)
        return value.replace("\r\n", "\n").replace("\r", "\n") if isinstance(value, str) else value
