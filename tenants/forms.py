from django import forms
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.utils.translation import gettext_lazy as _


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
        required=False,
        max_length=10,
        # A typographic apostrophe, as in the templates.
        widget=forms.Select(choices=[("", _("Your browser’s language")), *settings.LANGUAGES]),  # noqa: RUF001
    )
    time_zone = forms.CharField(
        label=_("Time zone"),
        required=False,
        max_length=64,
        widget=forms.TextInput(
            attrs={"list": "time-zones", "autocomplete": "off", "spellcheck": "false"}
        ),
    )
