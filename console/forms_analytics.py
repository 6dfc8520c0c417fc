"""The filters of the reviewer analytics page: a period of whole days in the viewer's zone, an
agent token of the tenant, a model seen in the period."""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from common.days import DAY_VALIDATORS, FIRST_DAY
from intents.selectors.analytics import DEFAULT_DAYS, MAX_DAYS, MODEL_MAX


class AnalyticsFilterForm(forms.Form):
    since = forms.DateField(
        label=pgettext_lazy("date range", "From"),
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
        validators=DAY_VALIDATORS,
    )
    until = forms.DateField(
        label=pgettext_lazy("date range", "To"),
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
        validators=DAY_VALIDATORS,
    )
    token = forms.TypedChoiceField(
        label=_("Agent token"), required=False, coerce=int, empty_value=None
    )
    # Free text with the models seen in the period offered (a datalist): the choices depend on
    # the period being filtered, and a model with no drafts simply shows nothing.
    model = forms.CharField(
        label=_("Model"),
        required=False,
        max_length=MODEL_MAX,
        widget=forms.TextInput(attrs={"list": "analytics-models", "autocomplete": "off"}),
    )

    def __init__(self, *args, tokens=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["token"].choices = [("", _("All tokens")), *[(t.pk, t.name) for t in tokens]]

    def clean(self):
        """The period as the page will count it: a missing end is today (in the viewer's zone),
        a missing start the default length before the end."""
        data = super().clean()
        since, until = data.get("since"), data.get("until")
        if "since" in self.errors or "until" in self.errors:
            return data
        end = until or timezone.localdate()
        start = since or max(FIRST_DAY, end - timedelta(days=DEFAULT_DAYS - 1))
        if start > end:
            raise forms.ValidationError(_("The period ends before it starts."))
        if (end - start).days >= MAX_DAYS:
            raise forms.ValidationError(
                _("A period is at most %(days)s days long.") % {"days": MAX_DAYS}
            )
        return data
