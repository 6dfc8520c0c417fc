"""GET /api/v1/analytics: the calling token's own figures, in its own tenant, against the seeded
history (tests/intents/analytics_seed.py)."""

from __future__ import annotations

import pytest

from tests.intents.analytics_seed import FORMULA, seed_history

MIN = 60.0


@pytest.fixture
def seeded(tenant_a, tenant_b):
    return seed_history(tenant_a, tenant_b)


def test_a_token_sees_its_own_figures(seeded, api):
    response = api.get("/analytics", token=seeded.billing_key)
    body = response.json()
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert body["token"] == {"id": seeded.billing.pk, "name": "billing-bot"}
    figures = {
        "approved_unchanged": 1,
        "approved_edited": 1,
        "median_edit_size": 8.0,
        "rejected": 2,
        "top_reasons": [
            {"reason": FORMULA.lower(), "count": 1},
            {"reason": "wrong tone", "count": 1},
        ],
        "expired": 0,
        "withdrawn": 0,
        "time_to_decision": {"median_seconds": 85 * MIN, "p90_seconds": 97 * MIN},
    }
    assert body["figures"] == figures
    assert body["by_model"] == [{"model": "claude-y", **figures}]


def test_the_other_token_sees_only_its_own(seeded, api):
    body = api.get("/analytics", token=seeded.support_key).json()
    assert body["token"]["name"] == "support-bot"
    assert (body["figures"]["approved_edited"], body["figures"]["expired"]) == (2, 1)
    assert body["figures"]["time_to_decision"] == {
        "median_seconds": 35 * MIN,
        "p90_seconds": 55 * MIN,
    }
    assert [m["model"] for m in body["by_model"]] == ["gpt-x", "unknown"]


def test_no_parameter_widens_the_scope(seeded, api):
    """Parameters that would name another token, tenant or model are refused, each named (they
    were ignored; the scope stays the token's either way)."""
    asked = api.get(
        "/analytics",
        token=seeded.billing_key,
        params={"agent_token": seeded.support.pk, "tenant": "tenant-b", "model": "gpt-x"},
    )
    assert asked.status_code == 422
    assert [e["field"] for e in asked.json()["errors"]] == ["agent_token", "model", "tenant"]


def test_another_tenants_token_sees_only_its_tenant(seeded, api, make_token, tenant_b):
    body = api.get("/analytics", token=make_token(tenant_b)).json()
    assert body["figures"]["approved_unchanged"] + body["figures"]["rejected"] == 0
    assert body["by_model"] == []


def test_the_period_is_honoured(seeded, api):
    body = api.get(
        "/analytics",
        token=seeded.support_key,
        params={"since": "2020-01-01T00:00:00Z", "until": "2020-02-01"},
    ).json()
    assert body["since"] == "2020-01-01T00:00:00Z"
    assert body["until"] == "2020-02-01T00:00:00Z"
    assert body["figures"]["rejected"] == 0


@pytest.mark.parametrize(
    ("params", "code", "field"),
    [
        ({"since": "2026-02-01", "until": "2026-01-01"}, "period_invalid", "since"),
        ({"since": "2020-01-01", "until": "2026-01-01"}, "period_too_long", "until"),
        ({"since": "yesterday"}, "validation_failed", "since"),
        ({"until": "2026-13-01"}, "validation_failed", "until"),
        ({"since": "2026-01-01\x00"}, "validation_failed", "since"),
        # The ends of the calendar: until - 30 days overflowed into a 500.
        ({"until": "0001-01-01"}, "period_out_of_range", "since"),
        ({"until": "0001-01-05T00:00:00+14:00"}, "period_out_of_range", "since"),
        ({"since": "9999-12-01", "until": "9999-12-31"}, "period_out_of_range", "since"),
    ],
)
def test_bad_periods_are_problems(seeded, api, params, code, field):
    response = api.get("/analytics", token=seeded.support_key, params=params)
    assert response.status_code == 422
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == code
    assert [e["field"] for e in response.json()["errors"]][:1] == [field]


def test_without_a_token_or_with_a_session_it_is_401(seeded, api, signed_in):
    assert api.get("/analytics", token=None).status_code == 401
    client = signed_in(seeded.admin)
    assert client.get("/api/v1/analytics").status_code == 401


def test_a_write_only_token_lacks_the_scope(seeded, api, make_token, tenant_a):
    response = api.get("/analytics", token=make_token(tenant_a, scopes=("drafts:write",)))
    assert response.status_code == 403
    assert response.json()["code"] == "insufficient_scope"


def test_in_the_openapi_schema(client, db):
    schema = client.get("/api/v1/openapi.json").json()
    operation = schema["paths"]["/api/v1/analytics"]["get"]
    assert [p["name"] for p in operation["parameters"]] == ["since", "until"]
    assert list(operation["responses"]["422"]["content"]) == ["application/problem+json"]
    assert "AnalyticsOut" in schema["components"]["schemas"]
