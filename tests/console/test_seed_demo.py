"""seed_demo: the demo people and tenants, with team review and languages to show, once."""

from io import StringIO

import pytest
from django.core.management import call_command

from tenants.models import Membership, Tenant, User

pytestmark = pytest.mark.django_db


def seed() -> str:
    out = StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def test_seed_demo_sets_up_team_review_and_languages_and_changes_nothing_the_second_time(sandbox):
    """Against a sandbox of its own (``sandbox``): without one, seed_demo's mailboxes asked the
    development default address, and a ``make run`` on the same machine answered there that the
    demo inboxes were taken (a red CI run while the demo was up)."""
    assert "(17 created)" in seed()  # 2 tenants, 7 people, 8 memberships
    acme = Tenant.objects.get(slug="acme")
    assert (acme.sla_minutes, acme.escalate_to_role) == (60, "admin")
    assert Tenant.objects.get(slug="globex").sla_minutes is None
    greta = User.objects.get(email="approver@globex.test")
    assert (greta.language, greta.time_zone) == ("de", "Europe/Berlin")
    glen = User.objects.get(email="viewer@globex.test")
    assert (glen.language, glen.time_zone) == ("es", "America/Mexico_City")
    assert User.objects.get(email="admin@acme.test").language == ""
    counts = (Tenant.objects.count(), User.objects.count(), Membership.objects.count())
    assert "(0 created)" in seed()
    assert (Tenant.objects.count(), User.objects.count(), Membership.objects.count()) == counts
