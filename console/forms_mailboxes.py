from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from common.addresses import normalize_address, normalize_domain, shown_with_its_characters
from console.forms import BasedOnForm
from mailboxes.models import Mailbox
from mailboxes.provisioning import MAX_ALLOWED_ENTRIES


def _lines(value: str) -> list[str]:
    items = [item.strip().lower() for chunk in value.splitlines() for item in chunk.split(",")]
    return sorted({item for item in items if item})


def _normalized(value: str, normalize) -> tuple[list[str], list[str]]:
    """(the entries of ``value`` in their normal form, sorted, each once; those that have none).

    A list past the service's bound (``MAX_ALLOWED_ENTRIES``) is refused before any entry is
    checked: each check costs some 60 us, and 4.5 MB of distinct domains held the web worker
    for 10 s only to be refused for their number."""
    items = _lines(value)
    if len(items) > MAX_ALLOWED_ENTRIES:
        raise ValidationError(
            gettext("At most %(most)d entries; this list has %(count)d.")
            % {"most": MAX_ALLOWED_ENTRIES, "count": len(items)}
        )
    good: set[str] = set()
    bad: list[str] = []
    for item in items:
        try:
            good.add(normalize(item))
        except ValueError:
            bad.append(shown_with_its_characters(item))
    return sorted(good), bad


DISPLAY_NAME_HELP = _("The sender's name your customers see, e.g. Acme Support.")


class MailboxCreateForm(forms.Form):
    username = forms.CharField(
        label=_("Username"),
        max_length=64,
        help_text=_(
            "The part before the @ of the new address: 1-64 lower-case letters, digits, dots, "
            "dashes or underscores, starting and ending with a letter or digit."
        ),
    )
    display_name = forms.CharField(
        label=_("Display name"),
        max_length=120,
        required=False,
        help_text=DISPLAY_NAME_HELP,
    )


class MailboxPolicyForm(BasedOnForm):
    display_name = forms.CharField(
        label=_("Display name"), max_length=120, required=False, help_text=DISPLAY_NAME_HELP
    )
    policy_mode = forms.ChoiceField(
        label=_("Policy mode"),
        choices=Mailbox.PolicyMode.choices,
        widget=forms.RadioSelect,
        help_text=_(
            "With only allowed domains and addresses, a draft to anyone else is refused when the "
            "agent posts it, flagged in review if it was already waiting, and blocked before "
            "sending."
        ),
    )
    allowed_domains = forms.CharField(
        label=_("Allowed domains"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_(
            "One domain a line, e.g. example.com. Exactly that domain: its subdomains "
            "(mail.example.com) need a line of their own. An address whose part before the @ "
            "holds a percent sign or an exclamation mark (which some mail servers read as another "
            "destination) is not allowed by its domain: list it under allowed addresses."
        ),
    )
    allowed_addresses = forms.CharField(
        label=_("Allowed addresses"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_("One address a line"),
    )

    def clean_allowed_domains(self) -> list[str]:
        # In the form recipients are compared in (common.addresses): an IDN domain may be typed
        # in Unicode or in punycode, and is kept in punycode either way.
        domains, bad = _normalized(self.cleaned_data["allowed_domains"], normalize_domain)
        if bad:
            raise ValidationError(
                ngettext(
                    "Not a domain name: %(names)s", "Not domain names: %(names)s", len(bad[:5])
                )
                % {"names": ", ".join(bad[:5])}
            )
        return domains

    def clean_allowed_addresses(self) -> list[str]:
        addresses, bad = _normalized(self.cleaned_data["allowed_addresses"], normalize_address)
        if bad:
            raise ValidationError(
                ngettext(
                    "Not an email address: %(names)s",
                    "Not email addresses: %(names)s",
                    len(bad[:5]),
                )
                % {"names": ", ".join(bad[:5])}
            )
        return addresses

    def clean(self):
        data = super().clean()
        if (
            data.get("policy_mode") == Mailbox.PolicyMode.RESTRICTED
            and not data.get("allowed_domains")
            and not data.get("allowed_addresses")
        ):
            raise ValidationError(
                gettext("A restricted mailbox needs at least one allowed domain or address.")
            )
        return data


class MailboxAssignmentForm(BasedOnForm):
    sla_minutes = forms.IntegerField(
        label=_("Target time to first decision (minutes)"),
        required=False,
        min_value=1,
        max_value=60 * 24 * 14,
        help_text=_("Overrides the tenant's target for this mailbox. Blank: the tenant's."),
        error_messages={
            "min_value": _("Give a positive number of minutes (at least 1)."),
            "max_value": _("At most %(limit_value)s minutes (14 days)."),
            "invalid": _("Give a whole number of minutes."),
        },
    )
    auto_assign = forms.BooleanField(
        required=False,
        label=_("Assign new drafts automatically"),
        help_text=_(
            "Round-robin among the active members who may approve for this mailbox, skipping "
            "those marked away."
        ),
    )
