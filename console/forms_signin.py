"""Input parsing for the tenant's sign-in settings page."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from common.egress import EgressRefused
from console.forms import BasedOnForm
from tenants import oidc, oidc_signin


class TwoFactorPolicyForm(BasedOnForm):
    require_two_factor = forms.BooleanField(
        required=False, label=_("Require two-factor sign-in for every member")
    )


class SsoForm(BasedOnForm):
    enabled = forms.BooleanField(required=False, label=_("Single sign-on is on"))
    issuer = forms.URLField(
        label=_("Issuer URL"),
        max_length=300,
        assume_scheme="https",
        widget=forms.TextInput(attrs={"inputmode": "url", "autocomplete": "off"}),
        help_text=_(
            "As your identity provider names it, e.g. https://login.example.com/realms/acme"
        ),
    )
    client_id = forms.CharField(label=_("Client ID"), max_length=200)
    client_secret = forms.CharField(
        label=_("Client secret"),
        required=False,
        max_length=500,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text=_("Stored encrypted, never shown again. Leave blank to keep the current one."),
    )
    password_signin_allowed = forms.BooleanField(
        required=False, label=_("Members may still sign in with a password")
    )
    domains = forms.CharField(
        label=_("Your company's e-mail domains"),
        max_length=1000,
        help_text=_("Comma-separated, e.g. acme.com, acme.de. Other addresses are refused."),
    )
    jit_role = forms.ChoiceField(
        label=_("New people from the identity provider"),
        choices=[
            ("", _("Are refused until invited")),
            ("viewer", _("Join as viewers")),
            ("approver", _("Join as approvers")),
        ],
        required=False,
    )

    def clean_issuer(self) -> str:
        from urllib.parse import urlsplit

        issuer = self.cleaned_data["issuer"].strip()
        parts = urlsplit(issuer)
        if parts.query or parts.fragment:
            raise forms.ValidationError(_("The issuer has no query or fragment."))
        try:
            return oidc.checked_url(issuer)
        except EgressRefused as refused:
            raise forms.ValidationError(refused.message) from None

    def clean_domains(self) -> list[str]:
        import re

        raw = [
            d.strip().lower().lstrip("@") for d in re.split(r"[,\s]+", self.cleaned_data["domains"])
        ]
        domains, bad = [], []
        for typed in filter(None, raw):
            try:
                domains.append(oidc_signin.sso_domain(typed))
            except ValueError:
                bad.append(typed)
        if bad:
            raise forms.ValidationError(_("Not a domain: %(bad)s") % {"bad": ", ".join(bad[:3])})
        if not domains:
            raise forms.ValidationError(_("List at least one domain."))
        return list(dict.fromkeys(domains))
