from django.db import migrations

from common import crypto

FIELDS = ("secret_sealed", "previous_secret_sealed")


def _tenant_aad(endpoint) -> str:
    return f"agent_event_endpoint:{endpoint.tenant_id}:secret"


def _endpoint_aad(endpoint) -> str:
    return f"tenant:{endpoint.tenant_id}:agent_event_endpoint:{endpoint.pk}:secret"


def _reseal(apps, source, target) -> None:
    """Each secret that opens under ``source`` sealed again under ``target``, with the key that
    sealed it (a rotation of the ring is reencrypt_secrets' job). One that already opens under
    ``target`` is left as it is, so a second run, or one after a run that stopped half way,
    changes nothing; one that opens under neither (its key gone from the ring) was unreadable
    before and stays so."""
    endpoints = apps.get_model("intents", "AgentEventEndpoint").objects
    for endpoint in endpoints.select_for_update().order_by("pk"):
        changed = []
        for field in FIELDS:
            sealed = getattr(endpoint, field)
            if not sealed:
                continue
            try:
                crypto.unseal(sealed, aad=target(endpoint))
                continue
            except crypto.SecretUnreadable:
                pass
            try:
                plaintext = crypto.unseal(sealed, aad=source(endpoint))
            except crypto.SecretUnreadable:
                continue
            setattr(endpoint, field, crypto.seal(plaintext, aad=target(endpoint)))
            changed.append(field)
        if changed:
            endpoint.save(update_fields=changed)


def bind_to_tenant(apps, schema_editor) -> None:
    _reseal(apps, _endpoint_aad, _tenant_aad)


class Migration(migrations.Migration):
    """An agent events endpoint's signing secrets (the current one and the one a rotation keeps
    for its grace) sealed for their endpoint, not only their tenant: the associated data names
    the row, as a mailbox's key and a webhook's secret do. The sealing is the code's and
    ``reencrypt_secrets``' (below); this migration only gives a rollback its way back, and
    runs twice to the same end."""

    dependencies = [
        ("intents", "0032_sendattempt_fillfactor"),
    ]

    # Forward it changes nothing: sealing every secret for its row here made each unreadable to
    # a process of the release before, which runs beside this one until the last host restarts
    # (and again after a rollback), so every delivery it made failed. The new release reads both
    # ways; ``reencrypt_secrets`` binds them once no old process is left (the contract step,
    # DEPLOYMENT.md "Upgrading"). Backward it seals each for its tenant alone again, for a
    # rollback: a database that ran this migration as first written, or reencrypt_secrets,
    # gives the release before what it reads.
    operations = [
        migrations.RunPython(migrations.RunPython.noop, bind_to_tenant, elidable=False),
    ]
