"""Input parsing for the tenant admin pages. Business rules live in tenants.services
and console.services."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from common.addresses import normalize_address
from common.days import DAY_VALIDATORS
from common.forms import AddressField, TextBoxField
from mailboxes.models import Mailbox
from tenants import policies, services
from tenants.models import AgentToken, Membership
from tenants.once_forms import new_form_id


class BasedOnForm(forms.Form):
    """A settings form that other admins may save too: ``based_on`` carries the fingerprint of
    the values the page showed (tenants.stale), and the service refuses a save based on values
    that changed since."""

    based_on = forms.CharField(required=False, max_length=2000, widget=forms.HiddenInput)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The policies page holds three of these forms: one id each, not three "id_based_on".
        self.fields["based_on"].widget.attrs["id"] = f"id_based_on_{type(self).__name__.lower()}"

    def clean(self):
        data = super().clean()
        if not data.get("based_on"):
            self.add_error(
                None,
                _("The form did not say which settings it was based on; open the page again."),
            )
        return data


class InviteForm(forms.Form):
    ALL, SOME = "all", "some"
    email = forms.EmailField(label=_("Email"), max_length=254)
    full_name = forms.CharField(label=_("Name (optional)"), max_length=150, required=False)
    role = forms.ChoiceField(
        label=_("Role"), choices=Membership.Role.choices, initial=Membership.Role.APPROVER
    )
    # Left out means every mailbox, Membership's default.
    approve = forms.ChoiceField(
        label=_("May approve for"),
        choices=[(ALL, _("Every mailbox")), (SOME, _("Only the mailboxes ticked"))],
        initial=ALL,
        required=False,
        widget=forms.RadioSelect,
    )
    mailboxes: forms.ModelMultipleChoiceField[Mailbox] = forms.ModelMultipleChoiceField(
        queryset=None, required=False, widget=forms.CheckboxSelectMultiple, label=_("Mailboxes")
    )

    def __init__(self, *args, mailboxes, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["mailboxes"].queryset = mailboxes

    def clean_approve(self) -> str:
        return self.cleaned_data["approve"] or self.ALL


class RoleForm(BasedOnForm):
    role = forms.ChoiceField(label=_("Role"), choices=Membership.Role.choices)


class RightsForm(BasedOnForm):
    approve_all_mailboxes = forms.BooleanField(
        required=False, label=_("May approve for every mailbox (including future ones)")
    )
    mailboxes: forms.ModelMultipleChoiceField[Mailbox] = forms.ModelMultipleChoiceField(
        queryset=None,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label=_("Otherwise only these mailboxes"),
    )

    def __init__(self, *args, mailboxes, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["mailboxes"].queryset = mailboxes


class PoliciesForm(BasedOnForm):
    review_deadline_hours = forms.IntegerField(
        label=_("Review deadline (hours)"),
        min_value=1,
        max_value=336,
        help_text=_("A pending draft expires this many hours after it arrives."),
    )
    second_approver_on_edit = forms.BooleanField(
        required=False,
        label=_("Require a second person when the approver edited the draft"),
    )
    retention_days = forms.IntegerField(
        label=_("Retention (days)"),
        min_value=1,
        max_value=3650,
        help_text=_("Message bodies and webhook payloads are purged after this many days."),
    )
    send_hold_seconds = forms.IntegerField(
        label=_("Undo window after Approve (seconds)"),
        min_value=0,
        max_value=300,
        help_text=_(
            "The send waits this long after Approve so an approver can undo it; 0 sends at once."
        ),
    )


class OwnDomainsForm(BasedOnForm):
    own_domains = TextBoxField(
        label=_("Your organisation's mail domains"),
        required=False,
        max_length=5000,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        help_text=_(
            "One per line or separated by commas, like example.com. A recipient outside them "
            "(and their subdomains) is pointed out as external on the draft page. Leave empty "
            "and no recipient is called external."
        ),
    )

    def clean_own_domains(self) -> list[str]:
        try:
            return policies.own_domains_parse(self.cleaned_data["own_domains"])
        except services.AdminError as error:
            raise forms.ValidationError(error.message, code=error.code) from None


class SuppressionAddForm(forms.Form):
    address = AddressField(label=_("Address"))
    note = forms.CharField(label=_("Reason"), max_length=500)

    def clean_address(self) -> str:
        # Refused here too, beside the other fields' refusals; the service checks it again.
        address = self.cleaned_data["address"]
        try:
            normalize_address(address)
        except ValueError as exc:
            raise forms.ValidationError(str(exc), code="invalid") from None
        return address


class SuppressionRemoveForm(forms.Form):
    reason = forms.CharField(label=_("Why may this address receive mail again?"), max_length=500)


class AuditFilterForm(forms.Form):
    SOURCES = [
        ("", _("Everything")),
        ("journal", _("Drafts and sends")),
        ("admin", pgettext_lazy("audit source", "Administration")),
    ]
    source = forms.ChoiceField(label=_("Source"), choices=SOURCES, required=False)
    action = forms.CharField(required=False, max_length=64, label=_("Action starts with"))
    actor = forms.CharField(required=False, max_length=254, label=_("Actor contains"))
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
    # A send's number (as on its page): the record of that one send, from its draft's first
    # version to its deliveries.
    send = forms.IntegerField(label=_("Send #"), required=False, min_value=1, max_value=2**63 - 1)
    # The page's last row (its time, source and id): rows written in one statement share the
    # time to the microsecond, so the time alone cannot say where the next page starts.
    before = forms.DateTimeField(label=_("Page"), required=False, widget=forms.HiddenInput)
    before_src = forms.ChoiceField(
        label=_("Page"), choices=SOURCES[1:], required=False, widget=forms.HiddenInput
    )
    before_id = forms.IntegerField(
        label=_("Page"), required=False, min_value=1, max_value=2**63 - 1, widget=forms.HiddenInput
    )


EXPIRY_CHOICES = [
    ("", _("Never")),
    ("7", _("In 7 days")),
    ("30", _("In 30 days")),
    ("90", _("In 90 days")),
    ("365", _("In a year")),
]


def one_time_form_id() -> forms.CharField:
    """The hidden one-time id of a form whose answer shows a secret once (tenants.once_forms): a
    fresh one each time the empty form is shown, the posted one when it is shown again."""
    return forms.CharField(
        widget=forms.HiddenInput, required=False, max_length=64, initial=new_form_id
    )


class TokenForm(forms.Form):
    name = forms.CharField(
        label=_("Name"), max_length=100, help_text=_("Which agent uses it, e.g. “support-bot”.")
    )
    scopes = forms.MultipleChoiceField(
        label=_("Scopes"),
        choices=AgentToken.Scope.choices,
        widget=forms.CheckboxSelectMultiple,
        initial=[AgentToken.Scope.DRAFTS_WRITE, AgentToken.Scope.DRAFTS_READ],
    )
    mailboxes = forms.ModelMultipleChoiceField(
        queryset=Mailbox.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label=_("Restrict to mailboxes"),
        help_text=_("Leave all unticked to allow every mailbox of this tenant."),
    )
    expires_in_days = forms.ChoiceField(choices=EXPIRY_CHOICES, required=False, label=_("Expires"))
    form_id = one_time_form_id()

    def __init__(self, *args, tenant, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["mailboxes"].queryset = Mailbox.objects.filter(tenant=tenant).order_by(
            "address"
        )


MAX_SLA_MINUTES = 60 * 24 * 14


def _minutes_field(label, help_text):
    return forms.IntegerField(
        label=label,
        required=False,
        min_value=1,
        max_value=MAX_SLA_MINUTES,
        help_text=help_text,
        error_messages={
            "min_value": _("Give a positive number of minutes (at least 1)."),
            "max_value": _("At most %(limit_value)s minutes (14 days)."),
            "invalid": _("Give a whole number of minutes."),
        },
    )


class DeadlinesForm(BasedOnForm):
    """The tenant's deadline target, warning window and escalation rule (policies page)."""

    sla_minutes = _minutes_field(
        _("Target time to first decision (minutes)"),
        _("Measured from the customer's message. Blank: no target."),
    )
    sla_warning_minutes = _minutes_field(
        _("Warning window (minutes)"),
        _("A draft is shown as due soon this long before its target. Blank: the last quarter."),
    )
    escalate_to = forms.TypedChoiceField(
        label=_("Escalate to a member"),
        required=False,
        coerce=int,
        empty_value=None,
    )
    escalate_to_role = forms.ChoiceField(
        label=_("…or round-robin among a role"),
        required=False,
        choices=[("", _("No role")), ("admin", _("Admins")), ("approver", _("Approvers"))],
    )

    def __init__(self, *args, members, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["escalate_to"].choices = [("", _("Nobody"))] + [
            (m.user_id, m.user.display_name) for m in members
        ]
        self.fields["escalate_to"].error_messages["invalid_choice"] = _(
            "Choose an active admin or approver of this tenant."
        )

    def clean(self):
        data = super().clean()
        target, window = data.get("sla_minutes"), data.get("sla_warning_minutes")
        if target and window and window >= target:
            self.add_error(
                "sla_warning_minutes", _("The warning window must be shorter than the target.")
            )
        if data.get("escalate_to") and data.get("escalate_to_role"):
            self.add_error("escalate_to_role", _("Escalate to a member or to a role, not both."))
        return data
