"""Console → Agent events: an endpoint URL whose host reads as another name (a Cyrillic a in
bank.example) is refused, naming its xn-- form; an IDN host of one script is allowed, and every page that
shows the URL (the list, the question before deleting it, the audit log) shows its xn-- form
beside it, the name its events go to. A loopback literal is refused as loopback."""

from __future__ import annotations

import pytest

from intents.models import AgentEventEndpoint

BASE = "/t/tenant-a/admin/agent-events/"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("url", "ace"),
    [
        ("https://b\u0430nk.example/hooks", "xn--bnk-6cd.example"),  # Cyrillic a among Latin
        ("https://xn--bnk-6cd.example/hooks", "xn--bnk-6cd.example"),  # the same, in Punycode
        ("https://\u0440\u0430\u0443.example/hooks", "xn--80a5ak.example"),  # Cyrillic "pay"
        ("https://b\u0131ll.example/hooks", "xn--bll-jua.example"),  # a dotless i
    ],
)
def test_a_lookalike_host_is_refused_naming_its_xn_form(tenant_a, member_of, signed_in, url, ace):
    client = signed_in(member_of(tenant_a, "admin").user)

    response = client.post(f"{BASE}new/", {"url": url, "event_types": ["draft.approved"]})

    assert response.status_code == 422
    assert f"({ace}) could be read as another name" in response.content.decode()
    assert AgentEventEndpoint.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url",
    [
        "https://\u043f\u0440\u0438\u043c\u0435\u0440.\u0440\u0444/hooks",
        "https://caf\u00e9.example/hooks",
        "https://\u4f8b\u3048.\u30c6\u30b9\u30c8/hooks",
    ],
)
def test_an_idn_host_of_one_script_is_allowed(tenant_a, member_of, signed_in, url):
    client = signed_in(member_of(tenant_a, "admin").user)

    created = client.post(f"{BASE}new/", {"url": url, "event_types": ["draft.approved"]})

    assert created.status_code == 200
    assert AgentEventEndpoint.objects.get().url == url


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("url", "ace"),
    [
        (
            "https://\u043f\u0440\u0438\u043c\u0435\u0440.\u0440\u0444/hooks",
            "xn--e1afmkfd.xn--p1ai",
        ),
        ("https://caf\u00e9.example/hooks", "xn--caf-dma.example"),
    ],
)
def test_an_idn_host_of_one_script_is_allowed_and_shown_with_its_xn_form(
    tenant_a, member_of, signed_in, url, ace
):
    client = signed_in(member_of(tenant_a, "admin").user)

    created = client.post(f"{BASE}new/", {"url": url, "event_types": ["draft.approved"]})
    endpoint = AgentEventEndpoint.objects.get()
    listing = client.get(BASE).content.decode()
    delete_question = client.get(f"{BASE}{endpoint.pk}/delete/").content.decode()
    audit = client.get("/t/tenant-a/admin/audit/").content.decode()

    assert created.status_code == 200
    assert ace in created.content.decode()
    assert ace in listing
    assert ace in delete_question
    assert ace in audit


@pytest.mark.django_db
def test_an_ascii_host_is_shown_as_it_is(tenant_a, member_of, signed_in):
    client = signed_in(member_of(tenant_a, "admin").user)

    client.post(
        f"{BASE}new/", {"url": "https://agent.example.com/hooks", "event_types": ["draft.approved"]}
    )
    listing = client.get(BASE).content.decode()

    assert "https://agent.example.com/hooks</td>" in listing.replace("\n", "")


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["https://[::1]/hooks", "https://127.0.0.1/hooks"])
def test_a_loopback_literal_in_production_is_refused_as_loopback(
    tenant_a, member_of, signed_in, settings, url
):
    settings.AGENT_EVENTS_ALLOW_PRIVATE_NETWORKS = False
    settings.EGRESS_ALLOW_LOOPBACK = False
    client = signed_in(member_of(tenant_a, "admin").user)

    response = client.post(f"{BASE}new/", {"url": url, "event_types": ["draft.approved"]})

    assert response.status_code == 422
    assert "is a loopback address" in response.content.decode()
    assert AgentEventEndpoint.objects.count() == 0
