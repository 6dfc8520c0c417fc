from django import forms
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.utils.translation import gettext_lazy as _

from tenants.preferences import check_language, check_time_zone
from tenants.services import AdminError


class SignInForm(AuthenticationForm):
    username = forms.EmailField(
        label=_("Email"),
        widget=forms.EmailInput(attrs={"autofocus": True, "autocomplete": "username"}),
    )

    def clean_username(self) -> str:
        return self.cleaned_data["username"].strip().lower()


class PreferencesForm(forms.Form):
    """What the preferences page posts. The rules (and their messages) are tenants.preferences'; the
    form only carries the two values, so a refusal reads the same from any caller."""

    language = forms.CharField(
        label=_("Language"),
        help_text=_(
            "Without a choice, the language your browser asks for is used (English when it asks "
            "for none we offer)."
        ),
        required=False,
        # A typographic apostrophe, as in the templates.
        widget=forms.Select(choices=[("", _("Your browser’s language")), *settings.LANGUAGES]),  # noqa: RUF001
    )
    time_zone = forms.CharField(
        label=_("Time zone"),
        help_text=_(
            "An IANA name such as Europe/Berlin or America/Mexico_City. Left empty, times are "
            "shown in UTC."
        ),
        required=False,
        max_length=64,
        widget=forms.TextInput(
            attrs={"list": "time-zones", "autocomplete": "off", "spellcheck": "false"}
        ),
    )

    # Both fields are checked here so that a page shows every refusal at once; the service
    # checks again (the same functions) for any other caller.
    def clean_language(self) -> str:
        return self._checked(check_language, self.cleaned_data["language"])

    def clean_time_zone(self) -> str:
        return self._checked(check_time_zone, self.cleaned_data["time_zone"])

    @staticmethod
    def _checked(check, value: str) -> str:
        try:
            return check(value)
        except AdminError as error:
            raise forms.ValidationError(error.message, code=error.code) from None
