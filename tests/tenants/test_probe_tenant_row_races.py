"""Two admins saving the tenant's settings at the same moment (an outsider's probe of the
policies and sign-in pages): each save reads the tenant's status FOR KEY SHARE as it starts
(tenants.services.require_tenant_open) and then locks the tenant's row to change it. Threads on
separate connections; the test holds the tenant's row while both start, so both are waiting on
it before either goes on."""

import pytest
from django.db import transaction

from tenants import oidc_signin, policies, signin_policy
from tenants.models import AuditEvent, Tenant
from tenants.services import TenantSuspended
from tests.intents.helpers import in_thread, until_done_or_waiting

pytestmark = pytest.mark.django_db(transaction=True)


def _together(tenant, *writes) -> list:
    outcomes: list[list] = [[] for _ in writes]
    threads = []
    with transaction.atomic():
        Tenant.objects.select_for_update().get(pk=tenant.pk)
        for n, (write, outcome) in enumerate(zip(writes, outcomes, strict=True)):
            threads.append(in_thread(write, outcome))
            until_done_or_waiting(threads[-1], n + 1)
    for thread in threads:
        thread.join(30)
    return [outcome[0] for outcome in outcomes]


def _policies(tenant, actor, hours):
    return lambda: policies.tenant_update_policies(
        tenant=tenant,
        review_deadline_hours=hours,
        second_approver_on_edit=False,
        retention_days=30,
        actor=actor.user,
    )


def _own_domains(tenant, actor, domain):
    return lambda: policies.tenant_set_own_domains(
        tenant=tenant, domains=[domain], actor=actor.user
    )


def _deadlines(tenant, actor, minutes):
    return lambda: policies.tenant_update_deadlines(
        tenant=tenant,
        sla_minutes=minutes,
        sla_warning_minutes=None,
        escalate_to_id=None,
        escalate_to_role="",
        actor=actor.user,
    )


def _two_factor(tenant, actor, required):
    return lambda: signin_policy.tenant_require_two_factor(
        tenant=tenant, required=required, actor=actor.user
    )


def _sso(tenant, actor):
    return lambda: oidc_signin.sso_settings_save(
        tenant=tenant,
        actor=actor.user,
        enabled=False,
        issuer="https://login.example.com",
        client_id="countersign",
        client_secret="s3cret",
        password_signin_allowed=True,
        domains=["a.test"],
        jit_role="",
    )


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (lambda t, a: _policies(t, a, 10), lambda t, b: _policies(t, b, 20)),
        (lambda t, a: _own_domains(t, a, "a.test"), lambda t, b: _own_domains(t, b, "b.test")),
        (lambda t, a: _deadlines(t, a, 60), lambda t, b: _deadlines(t, b, 90)),
        (lambda t, a: _two_factor(t, a, True), lambda t, b: _policies(t, b, 20)),
        (lambda t, a: _sso(t, a), lambda t, b: _deadlines(t, b, 90)),
    ],
    ids=["policies", "own_domains", "deadlines", "two_factor_and_policies", "sso_and_deadlines"],
)
def test_two_admins_saving_the_tenants_settings_at_once_both_save(
    tenant_a, member_of, first, second
):
    """Found by this probe: each held KEY SHARE on the tenant's row and then asked for FOR
    UPDATE, which the other's KEY SHARE refuses: PostgreSQL killed one as a deadlock, a 500 for
    an admin who had done nothing wrong."""
    alice, bob = member_of(tenant_a, "admin"), member_of(tenant_a, "admin")

    outcomes = _together(tenant_a, first(tenant_a, alice), second(tenant_a, bob))

    assert [o for o in outcomes if isinstance(o, Exception)] == []
    assert AuditEvent.objects.filter(tenant=tenant_a).count() == 2


def test_a_save_of_the_tenants_settings_in_a_suspended_tenant_is_refused(tenant_a, member_of):
    """The status is read under the row's lock now, as require_tenant_open read it before."""
    alice = member_of(tenant_a, "admin")
    Tenant.objects.filter(pk=tenant_a.pk).update(status=Tenant.Status.SUSPENDED)

    with pytest.raises(TenantSuspended):
        _own_domains(tenant_a, alice, "a.test")()

    assert Tenant.objects.get(pk=tenant_a.pk).own_domains == []
