"""Input parsing for the tenant's sign-in settings page."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _


class TwoFactorPolicyForm(forms.Form):
    require_two_factor = forms.BooleanField(
        required=False, label=_("Require two-factor sign-in for every member")
    )
