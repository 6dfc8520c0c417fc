"""The published contract: OpenAPI 3.1, offline docs under the CSP, and a schemathesis run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agent_api.auth import MAX_BODY_BYTES
from tests.agent_api.conftest import draft_body
from tests.sizes import FULL, size

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_openapi_document_is_3_1_with_every_route_and_problem_errors(client):
    schema = client.get("/api/v1/openapi.json").json()

    operations = {
        (path, method): op for path, item in schema["paths"].items() for method, op in item.items()
    }
    create = operations[("/api/v1/drafts", "post")]
    assert schema["openapi"].startswith("3.1")
    assert sorted(operations) == [
        ("/api/v1/analytics", "get"),
        ("/api/v1/broadcasts", "get"),
        ("/api/v1/broadcasts", "post"),
        ("/api/v1/broadcasts/{broadcast_id}", "get"),
        ("/api/v1/broadcasts/{broadcast_id}/recipients", "put"),
        ("/api/v1/drafts", "get"),
        ("/api/v1/drafts", "post"),
        ("/api/v1/drafts/{draft_id}", "get"),
        ("/api/v1/drafts/{draft_id}/versions", "post"),
        ("/api/v1/drafts/{draft_id}/withdraw", "post"),
        ("/api/v1/mailboxes", "get"),
    ]
    assert {
        k: v
        for p in create["parameters"]
        if p["name"] == "Idempotency-Key"
        for k, v in p.items()
        if k in ("name", "required")
    } == {"name": "Idempotency-Key", "required": True}
    assert list(create["responses"]["422"]["content"]) == ["application/problem+json"]
    assert "Retry-After" in create["responses"]["429"]["headers"]
    assert set(create["responses"]["201"]["headers"]) == {"Location", "Idempotent-Replayed"}
    assert "Retention: 24 hours" in schema["info"]["description"]
    # The body limit: a draft's text and its attachments in base64 (agent_api.auth).
    assert f"{MAX_BODY_BYTES // 1024} KiB" in schema["info"]["description"]
    assert "attachments[i]" in schema["info"]["description"]
    assert "**413** `storage_quota_exceeded`" in schema["info"]["description"]
    assert "**413** `mailbox_storage_quota_exceeded`" in schema["info"]["description"]
    assert list(create["responses"]["413"]["content"]) == ["application/problem+json"]
    assert not any("approve" in path or "send" in path for path, _ in operations)


@pytest.mark.django_db
def test_a_recipient_rows_number_is_documented_beside_its_field(client):
    """A broadcast's bad rows carry `row` (counting from 1) beside a `field` that names a JSON
    item by its 0-based index, as every other error does, or the CSV's column."""
    schema = client.get("/api/v1/openapi.json").json()
    row = schema["components"]["schemas"]["FieldError"]["properties"]["row"]
    description = schema["info"]["description"]

    assert "the recipient's number, counting from 1" in row["description"]
    assert "`recipients[1].address`" in description
    assert "`recipients_csv.variables.name`" in description


@pytest.mark.django_db
def test_the_idempotency_key_is_documented_on_every_write_as_the_routes_enforce_it(client):
    """POST /broadcasts answers 400 without a key (test_broadcasts.py) and the PUT replays with
    one: the schema called the first optional and did not list the second at all."""
    schema = client.get("/api/v1/openapi.json").json()
    operations = {
        op["operationId"]: op for item in schema["paths"].values() for op in item.values()
    }

    keys = {
        name: parameter["required"]
        for name, op in operations.items()
        for parameter in op.get("parameters", [])
        if parameter["name"] == "Idempotency-Key"
    }
    assert keys == {
        "draft_create": True,
        "broadcast_create": True,
        "draft_add_version": False,
        "draft_withdraw": False,
        "broadcast_replace_recipients": False,
    }
    assert set(operations["broadcast_create"]["responses"]["201"]["headers"]) == {
        "Location",
        "Idempotent-Replayed",
    }
    assert (
        "Idempotent-Replayed"
        in (operations["broadcast_replace_recipients"]["responses"]["200"]["headers"])
    )


@pytest.mark.django_db
def test_docs_page_loads_only_local_assets_under_the_csp(client):
    page = client.get("/api/v1/docs")
    html = page.content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)

    assert page.status_code == 200
    assert "script-src 'self'" in page["Content-Security-Policy"]
    assert assets
    assert all(url.startswith("/api/v1/docs/assets/") for url in assets)
    assert [client.get(url).status_code for url in assets] == [200] * len(assets)
    assert all(
        "src=" in tag or 'type="application/json"' in tag
        for tag in re.findall(r"<script[^>]*>", html)
    )
    assert client.get("/api/v1/docs/assets/..%2Fmain.py").status_code == 404


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_schemathesis_finds_no_server_error_and_no_schema_violation(
    live_server, settings, make_token, tenant_a, mailbox_factory, api, capsys
):
    """Runs the schemathesis CLI against the live server with a valid token (all checks)."""
    settings.API_RATE_LIMIT_PER_MINUTE = 100_000
    mailbox = mailbox_factory(tenant_a, username=f"fuzz-{os.getpid()}")
    token = make_token(tenant_a)
    api.post("/drafts", draft_body(mailbox), token=token, key="seed-draft")

    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "--config-file",
            str(ROOT / "tests" / "agent_api" / "schemathesis.toml"),
            "run",
            f"{live_server.url}/api/v1/openapi.json",
            "--header",
            f"Authorization: Bearer {token}",
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,"
            "response_headers_conformance,response_schema_conformance,negative_data_rejection",
            "--max-examples",
            os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", str(size(15, 100))),
            # The stateful phase chains operations through OpenAPI links, and the schema has
            # none yet (schemathesis says so): in the suite it only repeated the other phases'
            # requests. make test-full runs it.
            "--phases",
            "examples,coverage,fuzzing" if not FULL else "examples,coverage,fuzzing,stateful",
            "--workers",
            "1",
            "--seed",
            "1",
            "--no-color",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )

    with capsys.disabled():
        print(run.stdout[-4000:])
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
