"""A demo AI agent: customers write in, the agent drafts replies through the agent API.

Runs until killed (``make run`` starts it). Each round, for every demo tenant whose review queue is
below ``--target`` pending drafts, it plays one conversation: a customer mail is injected into the
sandbox AgentMail inbox (so the sandbox shows it and our webhook receives it), then a canned reply
is posted as a draft over HTTP through ``/api/v1/drafts`` with an Idempotency-Key, exactly as an
external agent would. Now and then it revises one of its pending drafts.

The agent authenticates with its own token, created once per tenant through ``token_create`` (name
``demo-agent``); the plaintext is kept in a git-ignored file under ``.data/`` and nowhere else.
Nothing here is fatal: a web server or sandbox that is not up yet means a retry with backoff.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.core.management.base import CommandError
from django.db import close_old_connections

from common.cli import BaseCommand, number, shown, text
from tenants.models import AgentToken, Tenant
from tenants.tokens import token_authenticate, token_create

log = logging.getLogger("intents.demo_agent")

TOKEN_NAME = "demo-agent"
DEFAULT_TENANTS = ("acme", "globex")
# A reply must answer a message Countersign has recorded, and the customer's mail reaches it through
# the sandbox's webhook a moment after it is injected: a 422 naming in_reply_to is retried this long.
INBOUND_WAIT_SECONDS = 15.0
# A round lists at most this many pending drafts (the API's page).
MOST_TARGET = 100


@dataclass(frozen=True)
class Conversation:
    name: str
    customer: str
    address: str
    subject: str
    question: str
    reply: str
    revision: str


CONVERSATIONS = [
    Conversation(
        "where-is-my-order",
        "Maria Lopez",
        "maria.lopez@example.com",
        "Where is my order #{n}?",
        "Hi, I ordered a week ago (order #{n}) and it still has not arrived. Can you check?",
        "Hello Maria,\n\nthank you for your patience. Order #{n} left our warehouse on Monday and "
        "is with the carrier now; it should reach you within two working days.\n\nBest regards,"
        "\nThe support team",
        "Hello Maria,\n\nthank you for your patience. Order #{n} left our warehouse on Monday; "
        "the carrier's tracking number is 1Z{n}99. It should reach you within two working days."
        "\n\nBest regards,\nThe support team",
    ),
    Conversation(
        "refund",
        "Jonas Weber",
        "jonas.weber@example.com",
        "Refund for a damaged item (#{n})",
        "The mug in order #{n} arrived broken. I would like a refund, please.",
        "Hello Jonas,\n\nI am sorry the mug arrived broken. We have started a full refund for "
        "order #{n}; it will show on your statement within 5 working days. No need to send the "
        "mug back.\n\nKind regards,\nThe support team",
        "Hello Jonas,\n\nI am sorry the mug arrived broken. We have refunded order #{n} in full "
        "(5 working days to appear) and added a 10% voucher to your account for the trouble.\n\n"
        "Kind regards,\nThe support team",
    ),
    Conversation(
        "password",
        "Aisha Khan",
        "aisha.khan@example.com",
        "Cannot reset my password",
        "The reset link in your email says it has expired, every time I try.",
        "Hi Aisha,\n\nreset links are valid for 30 minutes. I have sent you a fresh one just now; "
        "please use it within that time. If it fails again, reply here and we will reset it for "
        "you by hand.\n\nThanks,\nThe support team",
        "Hi Aisha,\n\nreset links are valid for 30 minutes and only the newest one works. I have "
        "sent you a fresh link just now. If it fails again, reply and we will reset it by hand."
        "\n\nThanks,\nThe support team",
    ),
    Conversation(
        "invoice",
        "Tom Becker",
        "tom.becker@example.com",
        "Invoice with our VAT number (#{n})",
        "Could you reissue the invoice for order #{n} with our VAT number DE123456789?",
        "Hello Tom,\n\nof course. The corrected invoice for order #{n}, with VAT number "
        "DE123456789, is attached to your account under Orders → Invoices.\n\nBest,\n"
        "The support team",
        "Hello Tom,\n\nof course. The corrected invoice for order #{n} now carries VAT number "
        "DE123456789; you can download it under Orders → Invoices.\n\nBest,\nThe support team",
    ),
    Conversation(
        "cancel",
        "Lena Novak",
        "lena.novak@example.com",
        "Please cancel my subscription",
        "I would like to cancel my subscription at the end of this month.",
        "Hi Lena,\n\nyour subscription is set to end on the last day of this month; you keep "
        "access until then and will not be charged again.\n\nAll the best,\nThe support team",
        "Hi Lena,\n\ndone: your subscription ends on the last day of this month, you keep access "
        "until then, and there will be no further charge. We would love to hear why you are "
        "leaving, if you have a minute.\n\nAll the best,\nThe support team",
    ),
    Conversation(
        "address-change",
        "Kenji Sato",
        "kenji.sato@example.com",
        "Change delivery address for #{n}",
        "I moved last week. Can order #{n} still go to my new address, 12 Elm Street?",
        "Hello Kenji,\n\norder #{n} has not shipped yet, so we have changed its delivery address "
        "to 12 Elm Street.\n\nRegards,\nThe support team",
        "Hello Kenji,\n\norder #{n} has not shipped yet, so its delivery address is now 12 Elm "
        "Street. Please also update the address in your profile for future orders.\n\nRegards,\n"
        "The support team",
    ),
]


def _names_in_reply_to(response: httpx.Response) -> bool:
    if response.status_code != 422:
        return False
    try:
        problem = response.json()
    except ValueError:
        return False
    return any(e.get("field") == "in_reply_to" for e in problem.get("errors", []))


def tokens_read(path: Path) -> dict[str, str]:
    """The tokens kept in ``path``: none when it is missing or empty. ValueError when it is not
    a file this agent wrote (not UTF-8, not a JSON object of slugs and tokens); a byte order mark
    that an editor added is allowed."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    if not raw.strip():
        return {}
    tokens = json.loads(raw.decode("utf-8-sig"))
    if not isinstance(tokens, dict) or not all(
        isinstance(slug, str) and isinstance(token, str) for slug, token in tokens.items()
    ):
        raise ValueError("not a JSON object of tenant slugs and tokens")
    return tokens


def token_file_checked(value: str) -> Path:
    """``--token-file`` as a path the agent can read and write, checked before any token is
    made: a folder there failed on the write after the token was created, one more stray token
    per round, and a file of something else was read as no tokens and then overwritten."""
    path = Path(value)
    try:
        tokens_read(path)
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CommandError(
            f"--token-file: cannot use {shown(value, 300)}: {error.strerror or error}"
        ) from None
    except ValueError as error:
        reason = "not UTF-8" if isinstance(error, UnicodeDecodeError) else "not its JSON"
        raise CommandError(
            f"--token-file: {shown(value, 300)} is not a token file of demo_agent ({reason}); name "
            "another file or move this one away. Nothing was changed."
        ) from None
    if not os.access(path if path.exists() else path.parent, os.W_OK):
        raise CommandError(f"--token-file: {shown(value, 300)} cannot be written.")
    return path


def api_url(value: str) -> str:
    """An argparse type for ``--api-url``: an http:// or https:// address with a host. An empty
    one was taken for none (the default address), and one without a scheme was called every
    round, failing as if the web server were down, forever."""
    text(value)
    try:
        parts = urlsplit(value.strip())
        usable = parts.scheme in {"http", "https"} and bool(parts.hostname)
    except ValueError:  # an unclosed [ of an IPv6 address, a port that is no number
        usable = False
    if not usable:
        raise argparse.ArgumentTypeError(
            f"{shown(value)} is not an http:// or https:// address (such as http://127.0.0.1:8000)"
        )
    return value.strip()


class Unavailable(Exception):
    """The web server or the sandbox is not answering yet."""


def default_api_url() -> str:
    return "http://" + os.environ.get("COUNTERSIGN_WEB_ADDR", "127.0.0.1:8000")


class Command(BaseCommand):
    help = "Play customer conversations and post drafted replies through the agent API (demo)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--api-url",
            type=api_url,
            default=None,
            help="Countersign base URL (default: http:// and COUNTERSIGN_WEB_ADDR, "
            "127.0.0.1:8000 when unset)",
        )
        parser.add_argument(
            "--tenants",
            type=text,
            default=",".join(DEFAULT_TENANTS),
            help="slugs of the tenants to draft for, comma-separated; one not found (yet) is "
            "skipped (default: %(default)s)",
        )
        # Checked here: nan or a negative interval made every round's sleep raise, which the loop
        # took for an outage and retried forever; a target past the 100 drafts a round lists
        # was never reached, so the agent drafted without pause.
        parser.add_argument(
            "--target",
            type=number(int, least=1, most=MOST_TARGET),
            default=6,
            help="Pending drafts per tenant (default: %(default)s)",
        )
        parser.add_argument(
            "--interval",
            type=number(float, least=0, above=True, most=3600),
            default=20.0,
            help="Seconds between rounds (default: %(default)s)",
        )
        parser.add_argument(
            "--token-file",
            default=str(Path(settings.BASE_DIR) / ".data" / "demo_agent_tokens.json"),
            help="where the agent keeps its tokens (default: %(default)s)",
        )
        parser.add_argument("--once", action="store_true", help="One round, then exit")
        parser.add_argument(
            "--revise-chance",
            type=number(float, least=0, most=1),
            default=0.2,
            help="Chance per round that a pending draft gets a second version (0 turns it "
            "off; default: %(default)s)",
        )

    def waits_for_database(self, options: dict) -> bool:
        return not options["once"]  # its loop backs off while anything is down

    def handle(self, *args, **options):
        if settings.PRODUCTION:
            raise CommandError("demo_agent refuses to run with COUNTERSIGN_ENV=production")
        slugs = [s.strip() for s in options["tenants"].split(",") if s.strip()]
        if not slugs:
            # An unset variable (--tenants "$TENANTS"): a loop drafting for nobody, silently.
            raise CommandError(
                "--tenants: no slug given; name the tenants to draft for, comma-separated, or "
                f"leave --tenants out for {','.join(DEFAULT_TENANTS)}."
            )
        agent = DemoAgent(
            api_url=(options["api_url"] or default_api_url()).rstrip("/"),
            sandbox_url=settings.AGENTMAIL_BASE_URL.rstrip("/"),
            tenant_slugs=slugs,
            target=options["target"],
            revise_chance=options["revise_chance"],
            token_file=token_file_checked(options["token_file"]),
            write=self.stdout.write,
        )
        if options["once"]:
            try:
                agent.round()
            except Unavailable as exc:
                # The loop backs off from it; one round has nothing to wait for.
                raise CommandError(
                    f"The round stopped: {exc}. Start the web server (make run) or name it "
                    "with --api-url."
                ) from None
            return
        failures = 0
        while True:
            try:
                below = agent.round()
                failures = 0
                # Fill an empty queue quickly, then trickle.
                time.sleep(2.0 if below else options["interval"])
            except Exception as exc:
                failures += 1
                delay = min(30.0, 2.0**failures)
                self.stdout.write(f"[demo_agent] waiting {delay:.0f}s: {exc.__class__.__name__}")
                log.info("intents.demo_agent.backoff", extra={"delay": delay})
                close_old_connections()
                time.sleep(delay)


class DemoAgent:
    def __init__(
        self, *, api_url, sandbox_url, tenant_slugs, target, token_file, write, revise_chance=0.2
    ):
        self.api_url = api_url
        self.sandbox_url = sandbox_url
        self.tenant_slugs = tenant_slugs
        self.target = target
        self.revise_chance = revise_chance
        self.token_file = token_file
        self.write = write
        self.http = httpx.Client(timeout=10.0, trust_env=False)
        self.counter = random.randint(1000, 8999)

    # --- tokens (the only part that touches the database) ---

    def _stored_tokens(self) -> dict[str, str]:
        try:
            return tokens_read(self.token_file)
        except (OSError, ValueError):
            return {}

    def _store_tokens(self, tokens: dict[str, str]) -> None:
        self.token_file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(tokens, handle)

    def token_for(self, tenant: Tenant) -> str:
        tokens = self._stored_tokens()
        plaintext = tokens.get(tenant.slug)
        if plaintext:
            token = token_authenticate(plaintext)
            if token is not None and token.tenant_id == tenant.pk:
                return plaintext
        name = TOKEN_NAME
        if AgentToken.objects.filter(tenant=tenant, name=name).exists():
            name = f"{TOKEN_NAME}-{uuid.uuid4().hex[:6]}"
        _, plaintext = token_create(
            tenant=tenant,
            name=name,
            scopes=[AgentToken.Scope.DRAFTS_WRITE, AgentToken.Scope.DRAFTS_READ],
            actor=None,
        )
        tokens[tenant.slug] = plaintext
        self._store_tokens(tokens)
        self.write(f"[demo_agent] created agent token '{name}' for {tenant.slug}")
        return plaintext

    # --- HTTP ---

    def _api(self, method: str, path: str, token: str, **kwargs) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}", **kwargs.pop("headers", {})}
        try:
            return self.http.request(
                method, f"{self.api_url}/api/v1{path}", headers=headers, **kwargs
            )
        except httpx.TransportError as exc:
            raise Unavailable(
                f"Countersign at {self.api_url} does not answer ({exc.__class__.__name__})"
            ) from exc

    def _inject_customer_mail(self, mailbox: str, conversation: Conversation, n: int) -> dict:
        try:
            response = self.http.post(
                f"{self.sandbox_url}/_sandbox/inbound",
                json={
                    "inbox_id": mailbox,
                    "from": f"{conversation.customer} <{conversation.address}>",
                    "subject": conversation.subject.format(n=n),
                    "text": conversation.question.format(n=n),
                },
            )
        except httpx.TransportError:
            return {}
        return response.json() if response.status_code == 200 else {}

    # --- one round ---

    def round(self) -> bool:
        """Play at most one conversation per tenant; True if some queue is still short."""
        below = False
        for slug in self.tenant_slugs:
            tenant = Tenant.objects.filter(slug=slug, status=Tenant.Status.ACTIVE).first()
            if tenant is None:
                continue
            token = self.token_for(tenant)
            mailboxes = self._api("GET", "/mailboxes", token)
            active = [m for m in mailboxes.json().get("items", []) if m["status"] == "active"]
            if mailboxes.status_code != 200 or not active:
                continue
            pending = self._api(
                "GET", "/drafts", token, params={"status": "pending", "limit": MOST_TARGET}
            ).json()["items"]
            if len(pending) < self.target:
                self._converse(token, random.choice(active)["address"])
                below = below or len(pending) + 1 < self.target
            if pending and random.random() < self.revise_chance:
                self._revise(token, pending)
        return below

    def _converse(self, token: str, mailbox: str) -> None:
        conversation = random.choice(CONVERSATIONS)
        self.counter += 1
        n = self.counter
        inbound = self._inject_customer_mail(mailbox, conversation, n)
        body = {
            "mailbox": mailbox,
            "to": [conversation.address],
            "subject": "Re: " + conversation.subject.format(n=n),
            "text": conversation.reply.format(n=n),
            "in_reply_to": inbound.get("message_id", ""),
            "thread_id": inbound.get("thread_id", ""),
            "provenance": {
                "agent": "demo_agent",
                "model": "canned-replies",
                "scenario": conversation.name,
            },
        }
        key = str(uuid.uuid4())
        # A timeout is retried with the same key: the API answers with the stored draft instead of
        # creating a second one. A refusal does not use up the key, so the wait for the customer's
        # mail to be recorded retries with it too.
        attempt = 0
        waiting_until = time.monotonic() + INBOUND_WAIT_SECONDS
        while True:
            try:
                response = self.http.post(
                    f"{self.api_url}/api/v1/drafts",
                    json=body,
                    headers={"Authorization": f"Bearer {token}", "Idempotency-Key": key},
                )
            except httpx.TransportError:
                attempt += 1
                if attempt >= 3:
                    raise Unavailable(
                        f"Countersign at {self.api_url} did not take a draft in 3 tries"
                    ) from None
                time.sleep(attempt)
                continue
            if response.status_code == 409:
                attempt += 1
                if attempt >= 3:
                    raise Unavailable(
                        f"Countersign at {self.api_url} did not take a draft in 3 tries"
                    )
                time.sleep(float(response.headers.get("Retry-After", "1")))
                continue
            if _names_in_reply_to(response) and time.monotonic() < waiting_until:
                time.sleep(0.2)
                continue
            break
        if response.status_code == 201:
            self.write(f"[demo_agent] drafted reply #{response.json()['id']} in {mailbox}")
        else:
            self.write(
                f"[demo_agent] draft refused: {response.status_code} "
                f"{response.json().get('detail', '')}"
            )

    def _revise(self, token: str, pending: list[dict]) -> None:
        own_first_versions = [d for d in pending if d["current_version"] == 1]
        if not own_first_versions:
            return
        summary = random.choice(own_first_versions)
        draft = self._api("GET", f"/drafts/{summary['id']}", token).json()
        scenario = (draft.get("provenance") or {}).get("scenario")
        conversation = next((c for c in CONVERSATIONS if c.name == scenario), None)
        if conversation is None or draft.get("current_version", {}).get("author") != "agent":
            return
        number = "".join(ch for ch in draft["current_version"]["subject"] if ch.isdigit()) or "0"
        version = draft["current_version"]
        response = self._api(
            "POST",
            f"/drafts/{draft['id']}/versions",
            token,
            json={
                "to": version["to"],
                "cc": version["cc"],
                "bcc": version["bcc"],
                "subject": version["subject"],
                "text": conversation.revision.format(n=number),
            },
            headers={"Idempotency-Key": str(uuid.uuid4())},
        )
        if response.status_code == 201:
            self.write(f"[demo_agent] revised draft #{draft['id']} (version 2)")
