"""System checks (``manage.py check``, ``check --deploy``) for settings whose values are each fine
alone but wrong together."""

from __future__ import annotations

import math

from django.conf import settings
from django.core.checks import Warning, register


@register(deploy=True)
def send_lease_outlasts_a_batch(app_configs, **kwargs) -> list[Warning]:
    """A batch whose every call waits out its timeouts must end inside its lease; otherwise its
    leases expire mid-call and its sends go through reconciliation (never sent twice, but slow).
    A warning, not a refusal: the crash harnesses run short leases on purpose."""
    rounds = math.ceil(settings.SEND_BATCH_SIZE / settings.SEND_CALL_CONCURRENCY)
    worst = rounds * (settings.AGENTMAIL_CONNECT_TIMEOUT + settings.AGENTMAIL_READ_TIMEOUT)
    if worst < settings.SEND_LEASE_SECONDS:
        return []
    return [
        Warning(
            f"A batch may take {worst:g} s ({rounds} rounds of calls that time out), not less "
            f"than SEND_LEASE_SECONDS ({settings.SEND_LEASE_SECONDS} s).",
            hint="Raise SEND_LEASE_SECONDS, or lower SEND_BATCH_SIZE / SEND_CALL_CONCURRENCY or "
            "the AgentMail timeouts.",
            id="countersign.W001",
        )
    ]
