"""Every model of ours is tenant-scoped, or listed here as global with the reason."""

from django.apps import apps

from tenants.models import Tenant

OUR_APPS = {"tenants", "mailboxes", "intents", "webhooks"}

GLOBAL = {
    "tenants.User": "a person may belong to several tenants; access goes through Membership",
    "tenants.Tenant": "the tenant itself",
    "intents.ProviderThrottle": "rate budget and circuit state per AgentMail key; holds no tenant data",
    "tenants.User_groups": "Django permission groups of a person (operators' admin only)",
    "tenants.User_user_permissions": "Django permissions of a person (operators' admin only)",
    "tenants.TotpDevice": "a person's authenticator app; serves every tenant they belong to",
    "tenants.RecoveryCode": "a person's recovery codes; serve every tenant they belong to",
    "tenants.Passkey": "a person's passkey; serves every tenant they belong to",
    "tenants.UserSession": "a person's signed-in session; tenant access is checked per request",
}
SCOPED_THROUGH_PARENT = {
    "webhooks.WebhookSecret": "endpoint",
    "webhooks.InboundBackfillMark": "mailbox",
    "intents.ApiRateWindow": "token",
    "tenants.Membership_approve_mailboxes": "membership",
    "tenants.AgentToken_mailboxes": "agenttoken",
    "tenants.Invitation_approve_mailboxes": "invitation",
}


def our_models():
    for model in apps.get_models(include_auto_created=True):
        if model._meta.app_label in OUR_APPS:
            yield f"{model._meta.app_label}.{model.__name__}", model


def test_every_model_is_tenant_scoped_or_listed_as_global():
    unscoped = []
    for label, model in our_models():
        if label in GLOBAL:
            continue
        if label in SCOPED_THROUGH_PARENT:
            parent = model._meta.get_field(SCOPED_THROUGH_PARENT[label]).related_model
            assert parent._meta.get_field("tenant").related_model is Tenant, label
            continue
        try:
            field = model._meta.get_field("tenant")
        except Exception:
            unscoped.append(label)
            continue
        if field.related_model is not Tenant:
            unscoped.append(label)
    assert unscoped == []


def test_the_global_list_names_only_real_models():
    labels = {label for label, _ in our_models()}
    assert set(GLOBAL) <= labels
    assert set(SCOPED_THROUGH_PARENT) <= labels
