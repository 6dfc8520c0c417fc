"""Counters of things that happened (attempts, finished intents, replays...), so that reading a
total costs the same however long the history is. ``counters.py`` is the only writer."""

from __future__ import annotations

from django.db import models


class Counter(models.Model):
    """One slice of a monotonic total: the sum of ``n`` over the shards of (tenant, name, labels).

    Writers add to the row of their database backend's shard (``counters.SHARDS``), so worker
    batches and webhook requests that commit at the same time rarely wait on the same row.
    """

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=64)
    labels = models.JSONField(default=dict)
    shard = models.SmallIntegerField(default=0)
    n = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "name", "labels", "shard"], name="counter_unique_slice"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name}{self.labels} = {self.n} (tenant {self.tenant_id}, shard {self.shard})"
