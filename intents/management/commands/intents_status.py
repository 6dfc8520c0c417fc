"""Operators' view of the send queue: counts by state, the oldest due age, one intent's attempts."""

from __future__ import annotations

from django.core.management.base import CommandError

from common.cli import BaseCommand, identifier
from common.text import unseen_shown
from config.bounded import ReadTimedOut, bounded_reads
from intents.models import SendAttempt, SendIntent
from intents.selectors import (
    intent_counts,
    oldest_queued_age_seconds,
    oldest_uncertain_age_seconds,
)
from intents.selectors.provider_waits import open_circuits, rate_limited, refused_keys


class Command(BaseCommand):
    help = (
        "Print send intents by state, the oldest due queued and oldest due uncertain ages, the "
        "sends that wait on AgentMail rather than on a worker (a refused key, an open circuit, "
        "a 429 whose Retry-After has not passed), and the attempts of one intent."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--intent", type=identifier, help="Show this intent's attempts and journal."
        )

    def handle(self, *args, intent=None, **options):
        # Read during incidents: a table locked by a migration must not hold the command too.
        try:
            with bounded_reads():
                self._report(intent)
        except ReadTimedOut as exc:
            raise CommandError(f"{exc.explained}; run it again once it ends.") from exc

    def _report(self, intent) -> None:
        row = None
        if intent is not None:
            # Looked up before anything is printed: the counts came first, then the refusal.
            row = SendIntent.objects.filter(pk=intent).select_related("tenant", "mailbox").first()
            if row is None:
                raise CommandError(f"--intent: no send intent {intent}.")
        counts = intent_counts()
        width = max(len(s) for s in counts)
        self.stdout.write("Send intents by state:")
        for state, n in counts.items():
            self.stdout.write(f"  {state:<{width}}  {n}")
        age = oldest_queued_age_seconds()
        self.stdout.write(
            "Oldest due queued intent: " + ("none" if age is None else f"{age:.1f} s waiting")
        )
        age = oldest_uncertain_age_seconds()
        self.stdout.write(
            "Oldest due uncertain intent (replay or label lookup): "
            + ("none" if age is None else f"{age:.1f} s waiting")
        )
        self._provider_waits()
        if row is None:
            return
        self.stdout.write("")
        self.stdout.write(
            f"Intent {row.pk} ({row.tenant.slug}, {row.mailbox.address}): {row.state}, "
            f"{row.attempts} attempt(s), key {row.idempotency_key}"
        )
        # What a member typed (a cancel reason, evidence) and what AgentMail answered are
        # printed with every control and format character as its code point: raw, an escape
        # sequence reached the operator's terminal, and a line break forged journal lines.
        if row.provider_message_id:
            self.stdout.write(f"  provider message id: {unseen_shown(row.provider_message_id)}")
        if row.last_error_code:
            self.stdout.write(
                f"  last error: {unseen_shown(row.last_error_code)} "
                f"{unseen_shown(row.last_error_detail[:200])}"
            )
        self.stdout.write(f"  next attempt at: {row.next_attempt_at:%Y-%m-%d %H:%M:%S.%f %Z}")
        attempts = SendAttempt.objects.filter(intent=row).order_by("number")
        self.stdout.write("  #  kind    outcome     http  ms     worker")
        for a in attempts:
            self.stdout.write(
                f"  {a.number:<2} {a.kind:<7} {a.outcome:<11} {a.http_status or '-':<5} "
                f"{a.latency_ms if a.latency_ms is not None else '-':<6} {a.worker}"
                + (f"  {unseen_shown(a.error_code)}" if a.error_code else "")
            )
        for event in row.events.order_by("created_at", "id"):
            self.stdout.write(
                f"  {event.created_at:%H:%M:%S.%f} {event.action} "
                f"{event.from_state or '-'} -> {event.to_state or '-'} "
                f"{unseen_shown(event.reason[:80])}"
            )

    def _provider_waits(self) -> None:
        """Sends that wait on AgentMail, not on a worker, and what ends the wait."""
        for refused in refused_keys():
            self.stdout.write(
                f"AgentMail refused the key of {refused.address} ({refused.tenant}) at "
                f"{refused.since:%Y-%m-%d %H:%M:%S %Z}; {refused.waiting} "
                f"send{'' if refused.waiting == 1 else 's'} waiting. Nothing is sent from it "
                "until a tenant admin uses 'Check the key again' (or 'Replace the key') on the "
                "mailbox's page."
            )
        for circuit in open_circuits():
            names = ", ".join(f"{address} ({slug})" for slug, address in circuit.mailboxes)
            until = f"{circuit.until:%H:%M:%S %Z}" if circuit.until else "its next probe"
            what = (
                f"calls paused until {until}, then one probe"
                if circuit.state == "open"
                else f"one probe under way (until {until})"
            )
            self.stdout.write(
                f"AgentMail keeps failing for {names or circuit.key_ref}: {what}; its sends "
                "wait and go out once a probe is answered. See the attempts' errors "
                "(--intent ID) and AgentMail's status."
            )
        for limited in rate_limited():
            names = ", ".join(f"{address} ({slug})" for slug, address in limited.mailboxes)
            self.stdout.write(
                f"AgentMail rate-limited the key of {names or limited.key_ref}: its sends wait "
                f"until {limited.until:%H:%M:%S %Z} (Retry-After). If it recurs, lower "
                "SEND_RATE_PER_KEY / SEND_BURST_PER_KEY or ask AgentMail for a higher limit."
            )
