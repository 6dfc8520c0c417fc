"""Outside probe of registration (common/egress.validate_url): a literal address is refused when
typed, however the HTTP client will read it. httpx reads an ideographic full stop (U+3002, and
its full-width and half-width kin) in a host as a dot, and a host's trailing dot goes the same
way at the resolver, so ``https://127。0。0。1/`` posts to 127.0.0.1: it was accepted when typed
(the standard library's ``urlsplit`` sees no address in it) and refused only at the first
delivery, as the numeric spellings were before."""

from __future__ import annotations

import pytest

from common.egress import EgressRefused, validate_url
from intents.models import AgentEventEndpoint
from intents.services.event_endpoints import endpoint_create
from tenants.services import AdminError


@pytest.mark.parametrize(
    ("url", "allow_private", "code"),
    [
        ("https://127\u30020\u30020\u30021/", False, "address_loopback"),
        ("https://10\uff0e0\uff0e0\uff0e1/", False, "address_private"),  # full-width full stop
        ("https://192\uff61168\uff610\uff611/", False, "address_private"),  # half-width
        ("https://169\u3002254\u3002169\u3002254/latest/", True, "address_forbidden"),
        ("https://127.0.0.1./", False, "address_loopback"),
        ("https://169.254.169.254./", True, "address_forbidden"),
        ("https://2130706433./", False, "address_loopback"),
    ],
)
def test_an_address_spelled_with_other_dots_is_refused_when_typed(url, allow_private, code):
    with pytest.raises(EgressRefused) as refused:
        validate_url(url, allow_private=allow_private, allow_loopback=False, require_https=True)
    assert refused.value.code == code


def test_a_name_with_other_dots_or_a_trailing_dot_is_still_accepted():
    for url in ("https://hooks\u3002example\u3002com/in", "https://hooks.example.com./in"):
        assert (
            validate_url(url, allow_private=False, allow_loopback=False, require_https=True) == url
        )


@pytest.mark.django_db
def test_registration_keeps_no_endpoint_for_such_an_address(tenant_a, member_of, settings):
    settings.AGENT_EVENTS_ALLOW_PRIVATE_NETWORKS = False
    settings.EGRESS_ALLOW_LOOPBACK = False
    admin = member_of(tenant_a, "admin").user
    with pytest.raises(AdminError) as refused:
        endpoint_create(
            tenant=tenant_a,
            url="https://127\u30020\u30020\u30021/hooks",
            event_types=["draft.rejected"],
            actor=admin,
        )
    assert (refused.value.code, refused.value.field) == ("address_loopback", "url")
    assert AgentEventEndpoint.objects.count() == 0
