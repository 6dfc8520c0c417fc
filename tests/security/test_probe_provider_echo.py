"""Secrets probe: an AgentMail error that quotes the key it was called with (a gateway's
"invalid API key am_…", a 5xx page that echoes the request's headers). The organization key is
every tenant's (provisioning only); an inbox key is its mailbox's and nobody's to read. The
answer's words reach a tenant admin's page (a provisioning refusal), every reviewer's send page
(the attempt's last error), the operators' command output and the log."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from intents import sending
from intents.models import SendIntent
from mailboxes import provisioning
from mailboxes.provider.responses import parse_error_body
from tests.factories import approve_new_draft
from tests.security.secret_scan import captured_logs, database_text, leaked

pytestmark = pytest.mark.django_db

ORG_KEY = "am_" + "0f1e2d3c4b5a6978" * 4


class EchoingAgentMail:
    """Answers every call with ``status`` and an AgentMail-shaped error whose message quotes the
    request's Authorization header (the process edge: AgentMail itself)."""

    def __init__(self, status: int):
        answer = status

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                said = self.headers.get("Authorization", "")
                body = json.dumps(
                    {
                        "name": "Error",
                        "code": "unauthorized" if answer == 401 else "internal_error",
                        "message": f"The key in {said!r} is not valid here",
                    }
                ).encode()
                self.send_response(answer)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _answer

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def echoing(settings):
    servers = []

    def start(status: int) -> EchoingAgentMail:
        server = EchoingAgentMail(status)
        servers.append(server)
        settings.AGENTMAIL_BASE_URL = server.url
        return server

    yield start
    for server in servers:
        server.close()


def test_a_provisioning_refusal_that_quotes_the_organization_key_shows_it_nowhere(
    tenant_a, member_of, signed_in, settings, echoing
):
    admin = member_of(tenant_a, "admin").user
    echoing(401)
    settings.AGENTMAIL_ORG_API_KEY = ORG_KEY

    with captured_logs() as logs:
        with pytest.raises(provisioning.ProvisioningError) as refusal:
            provisioning.mailbox_create(tenant=tenant_a, username="support", actor=admin)
        page = signed_in(admin).post(
            f"/t/{tenant_a.slug}/mailboxes/new/", {"username": "help"}, follow=True
        )
        with pytest.raises(CommandError) as command:
            call_command("agentmail_recover", tenant_a.slug)

    said = [str(refusal.value), page.content.decode(), str(command.value)]
    assert "AgentMail refused the request" in said[0]
    assert "'Bearer [hidden]' is not valid here" in said[0]
    assert leaked({"org key": ORG_KEY}, said + logs.texts() + database_text()) == []


def test_a_send_error_that_quotes_the_inbox_key_shows_it_nowhere(
    tenant_a, member_of, signed_in, mailbox_factory, echoing
):
    approver = member_of(tenant_a, "approver").user
    mailbox = mailbox_factory(tenant_a)
    key = mailbox.api_key()
    intent = approve_new_draft(tenant_a, mailbox, approver)
    echoing(500)

    with captured_logs() as logs:
        sending.run_once(worker="w", limit=10)
        page = signed_in(approver).get(f"/t/{tenant_a.slug}/outbox/{intent.pk}/")

    assert SendIntent.objects.get(pk=intent.pk).state == "uncertain"
    texts = [page.content.decode(), *logs.texts(), *database_text()]
    assert leaked({"inbox key": key}, texts) == []


def test_a_key_quoted_past_the_length_kept_is_hidden_before_the_cut():
    """The message is cut at 300 characters: cut first, a key across the cut kept its start."""
    quoted = "x" * 279 + " " + ORG_KEY + " refused"
    assert parse_error_body({"message": quoted}).message == "x" * 279 + " am_[hidden] refused"
    assert parse_error_body(quoted).message == "x" * 279 + " am_[hidden] refused"
