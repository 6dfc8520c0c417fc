from django import forms
from django.conf import settings
from django.contrib.auth import authenticate
from django.contrib.auth import forms as auth_forms
from django.contrib.auth.forms import AuthenticationForm
from django.utils.translation import gettext_lazy as _

from common.addresses import account_lookup_form
from tenants.preferences import check_language, check_time_zone
from tenants.services import AdminError


class SignInForm(AuthenticationForm):
    # 254: the longest address an account can have, and django-axes keeps the address in a
    # 255-character column (a longer one was a database error, and no throttle).
    username = forms.EmailField(
        label=_("Email"),
        max_length=254,
        widget=forms.EmailInput(attrs={"autofocus": True, "autocomplete": "username"}),
    )

    def clean_username(self) -> str:
        # The form accounts are stored in (an IDN domain as its A-label), which django-axes then
        # counts failures under too: "bob@\uff41cme.test" is Bob's address.
        return account_lookup_form(self.cleaned_data["username"])


class PasswordChangeForm(auth_forms.PasswordChangeForm):
    """Django's form (current password, new one twice, the password validators). The current
    password is checked through authenticate(), not check_password(): django-axes then counts a
    wrong one against the same address and client as at sign-in, and locks both out alike."""

    def __init__(self, user, *args, request, **kwargs):
        self.request = request
        super().__init__(user, *args, **kwargs)

    def clean_old_password(self) -> str:
        old_password = self.cleaned_data["old_password"]
        person = authenticate(self.request, username=self.user.email, password=old_password)
        if person is None or person.pk != self.user.pk:
            raise forms.ValidationError(
                self.error_messages["password_incorrect"], code="password_incorrect"
            )
        return old_password


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


class AwayForm(forms.Form):
    """The away button (a member's own on the queue, an admin's on the member page): "1" marks
    the member away, "0" present. Anything else is refused; any non-empty value once marked them
    away."""

    away = forms.ChoiceField(
        choices=[("1", _("away")), ("0", _("present"))],
        error_messages={
            "required": _("Choose away or present."),
            "invalid_choice": _("Choose away or present."),
        },
    )
