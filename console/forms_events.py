"""The form of the agent events page: where to send which events. The URL's rules (scheme,
no user name, public addresses) are the service's (intents.services.event_endpoints)."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from console.forms import one_time_form_id
from intents.models import EventType
from mailboxes.models import Mailbox


class EndpointForm(forms.Form):
    url = forms.CharField(
        label=_("URL"),
        max_length=2000,
        help_text=_("Where Countersign POSTs each event, e.g. https://agent.example.com/hooks."),
    )
    description = forms.CharField(label=_("Description (optional)"), max_length=200, required=False)
    event_types = forms.MultipleChoiceField(
        label=_("Events"),
        choices=EventType.choices,
        widget=forms.CheckboxSelectMultiple,
        initial=EventType.values,
    )
    mailbox = forms.ModelChoiceField(
        queryset=Mailbox.objects.none(),
        required=False,
        label=_("Only drafts of this mailbox"),
        empty_label=_("Every mailbox"),
    )
    form_id = one_time_form_id()

    def __init__(self, *args, tenant, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["mailbox"].queryset = Mailbox.objects.filter(tenant=tenant).order_by("address")
