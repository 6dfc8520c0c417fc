"""System checks (``manage.py check``, ``check --deploy``) for settings whose values are each fine
alone but wrong together."""

from __future__ import annotations

import math

from django.conf import settings
from django.core.checks import Warning, register

from config.env import DEVELOPMENT_ENCRYPTION_KEY


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


@register(deploy=True)
def no_published_key_in_the_key_ring(app_configs, **kwargs) -> list[Warning]:
    """Production refuses the development encryption key (written in the source) first in
    SECRET_ENCRYPTION_KEYS, where it would seal new secrets, but opens what it sealed with it
    from a later entry until ``reencrypt_secrets`` has sealed them again; kept after that, it
    still opens every secret of a database dump for anyone who can read the source."""
    published = DEVELOPMENT_ENCRYPTION_KEY.partition(":")[2]
    entries = [
        n
        for n, entry in enumerate(settings.SECRET_ENCRYPTION_KEYS, start=1)
        if entry.partition(":")[2].strip() == published
    ]
    if not entries or not settings.PRODUCTION:
        return []
    return [
        Warning(
            f"SECRET_ENCRYPTION_KEYS entry {entries[0]} is the development key written in "
            "Countersign's source (its value is not shown).",
            hint="Run reencrypt_secrets, then remove that entry (DEPLOYMENT.md, Rotating secrets).",
            id="countersign.W002",
        )
    ]
