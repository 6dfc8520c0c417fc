"""Every answer under /api/v1/ that is not a success is problem+json, whatever the route or method:
an agent parses one error shape. The API is token-authenticated, so CSRF does not apply to it."""

from __future__ import annotations

import pytest
from django.test import Client

from intents.models import Draft
from tests.agent_api.conftest import draft_body

pytestmark = pytest.mark.django_db


@pytest.fixture
def strict_client():
    # Django's test client skips CSRF checks unless asked: a browser-like client does not.
    return Client(enforce_csrf_checks=True)


def _problem(response, status):
    assert response.status_code == status
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert body["status"] == status
    assert body["type"].startswith("urn:countersign:problem:")
    return body


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH", "DELETE"])
def test_an_unknown_route_is_a_problem_404_for_every_method(strict_client, token_a, method):
    response = strict_client.generic(
        method,
        "/api/v1/no-such-route",
        data="{}",
        content_type="application/json",
        headers={"Authorization": f"Bearer {token_a}"},
    )

    assert _problem(response, 404)["code"] == "not_found"


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("DELETE", "/api/v1/drafts", "GET, POST"),
        ("PUT", "/api/v1/mailboxes", "GET"),
        ("POST", "/api/v1/mailboxes", "GET"),
        ("GET", "/api/v1/drafts/1/withdraw", "POST"),
        ("POST", "/api/v1/openapi.json", "GET"),
        ("POST", "/api/v1/", "GET"),
        ("POST", "/api/v1/docs/assets/swagger-ui.css", "GET"),
    ],
)
def test_a_wrong_method_is_a_problem_405_with_allow(strict_client, token_a, method, path, allow):
    response = strict_client.generic(
        method,
        path,
        data="{}",
        content_type="application/json",
        headers={"Authorization": f"Bearer {token_a}"},
    )

    body = _problem(response, 405)
    assert body["code"] == "method_not_allowed"
    assert response["Allow"] == allow
    assert method in body["detail"]


def test_a_session_cookie_without_token_is_still_refused_with_csrf_enforced(
    strict_client, member_of, tenant_a, mailbox_a
):
    strict_client.force_login(
        member_of(tenant_a, "admin").user, backend="django.contrib.auth.backends.ModelBackend"
    )

    response = strict_client.post(
        "/api/v1/drafts",
        data=draft_body(mailbox_a),
        content_type="application/json",
        headers={"Idempotency-Key": "cookie-1"},
    )

    assert _problem(response, 401)["code"] == "unauthenticated"
    assert Draft.objects.count() == 0


def test_an_unknown_docs_asset_is_a_problem_404(strict_client):
    assert _problem(strict_client.get("/api/v1/docs/assets/nope.js"), 404)["code"] == "not_found"


def test_no_answer_of_the_api_is_kept_by_a_cache(api, token_a, mailbox_a):
    """Found by an outside probe: the staff pages are stored by no cache (tenants.private_pages),
    but the API's answers, which hold the same customer mail and addresses, carried no
    Cache-Control at all, so a browser trying the API from the interactive docs kept them on
    disk, and a proxy or CDN told to cache may keep them. Every answer but the docs' assets
    (which name their own) says no-store: a read, a created draft, its replay, an error."""
    created = api.post("/drafts", draft_body(mailbox_a), token=token_a, key="nocache-1")
    answers = {
        "created": created,
        "replayed": api.post("/drafts", draft_body(mailbox_a), token=token_a, key="nocache-1"),
        "read": api.get(f"/drafts/{created.json()['id']}", token=token_a),
        "listed": api.get("/drafts", token=token_a),
        "mailboxes": api.get("/mailboxes", token=token_a),
        "missing": api.get("/drafts/987654321", token=token_a),
        "unauthenticated": api.get("/drafts", token=None),
    }
    assert created.status_code == 201
    assert answers["replayed"]["Idempotent-Replayed"] == "true"
    assert {
        name: "no-store" in response.get("Cache-Control", "") for name, response in answers.items()
    } == dict.fromkeys(answers, True)
    asset = api.client.get("/api/v1/docs/assets/swagger-ui.css")
    assert asset["Cache-Control"] == "public, max-age=86400"
