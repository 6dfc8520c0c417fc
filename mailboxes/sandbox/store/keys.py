"""API keys (`/v0/api-keys` and the pod and inbox routes) and the identity a secret stands for."""

from __future__ import annotations

import hashlib
import json
import secrets
import uuid
from typing import Any

from ..records import Identity, Page, dumps, iso
from .core import Core, Resource

ORG_KEY_NAMESPACE = uuid.UUID("5b0c6f0e-6d43-4c8e-9a57-2f1f7d6f0c11")


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class ApiKeys(Resource):
    def __init__(self, core: Core, org_key: str):
        super().__init__(core)
        self.org_key = org_key
        self._identities: dict[str, Identity | None] = {}
        self.org_identity = Identity(
            api_key_id=str(uuid.uuid5(ORG_KEY_NAMESPACE, org_key)),
            prefix=org_key[:10],
            scope_type="organization",
            pod_id=None,
            inbox_id=None,
            permissions=None,
        )

    def forget(self) -> None:
        """Drop the cached identities (a key was deleted, or the store was reset)."""
        self._identities.clear()

    def identity_for(self, secret: str) -> Identity | None:
        if secrets.compare_digest(secret, self.org_key):
            return self.org_identity
        digest = hash_secret(secret)
        if digest in self._identities:
            return self._identities[digest]
        with self.lock:
            row = self.db.execute(
                "SELECT api_key_id, doc, scope_type, pod_id, inbox_id, permissions "
                "FROM api_keys WHERE secret_hash=?",
                (digest,),
            ).fetchone()
        identity = None
        if row:
            doc = json.loads(row[1])
            identity = Identity(
                api_key_id=row[0],
                prefix=doc["prefix"],
                scope_type=row[2],
                pod_id=row[3],
                inbox_id=row[4],
                permissions=json.loads(row[5]) if row[5] else None,
            )
        if len(self._identities) > 10_000:
            self._identities.clear()
        self._identities[digest] = identity
        return identity

    def create(
        self,
        *,
        scope_type: str,
        pod_id: str | None,
        inbox_id: str | None,
        name: str | None,
        permissions: dict | None,
    ) -> dict:
        secret = "am_" + secrets.token_hex(32)
        api_key_id = str(uuid.uuid4())
        now = iso(self.core.now())
        doc: dict[str, Any] = {
            "type": "bearer",
            "api_key_id": api_key_id,
            "prefix": secret[:10],
            "name": name or "",
        }
        if pod_id:
            doc["pod_id"] = pod_id
        if inbox_id:
            doc["inbox_id"] = inbox_id
        if permissions is not None:
            doc["permissions"] = permissions
        doc |= {"created_at": now, "updated_at": now}
        with self.lock, self.core.tx():
            self.db.execute(
                "INSERT INTO api_keys (api_key_id, secret_hash, scope_type, pod_id, inbox_id, "
                "permissions, doc) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    api_key_id,
                    hash_secret(secret),
                    scope_type,
                    pod_id,
                    inbox_id,
                    dumps(permissions) if permissions is not None else None,
                    dumps(doc),
                ),
            )
        created = {k: v for k, v in doc.items() if k not in ("type", "updated_at")}
        return {"api_key_id": api_key_id, "api_key": secret, **created}

    def page(
        self, *, pod_id: str | None, inbox_ids: list[str] | None, limit: int, token: str | None
    ) -> Page:
        where: list[str] = []
        params: list[Any] = []
        scope: list[str] = []
        if pod_id is not None:
            scope.append("pod_id=?")
            params.append(pod_id)
        if inbox_ids is not None:
            if inbox_ids:
                scope.append("inbox_id IN (" + ",".join("?" * len(inbox_ids)) + ")")
                params.extend(inbox_ids)
            elif pod_id is None:
                scope.append("0")
        if scope:
            where.append("(" + " OR ".join(scope) + ")")
        return self.core.page("api_keys", where, params, limit, token, False)

    def get(self, api_key_id: str) -> dict | None:
        with self.lock:
            row = self.db.execute(
                "SELECT doc FROM api_keys WHERE api_key_id=?", (api_key_id,)
            ).fetchone()
        return json.loads(row[0]) if row else None

    def delete(self, api_key_id: str) -> None:
        with self.lock, self.core.tx():
            self.db.execute("DELETE FROM api_keys WHERE api_key_id=?", (api_key_id,))
            self._identities.clear()
