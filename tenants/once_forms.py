"""One answer per form for the admin forms whose answer shows a secret once (an agent token, an
agent-event endpoint's signing secret, added or rotated).

A second click while the first answer is still on its way posts the form again, and the browser
shows the second answer: before this, "A token with this name already exists." (or "already has an
endpoint", or "rotated since you opened this page"), and the secret the first post created was
shown to nobody. The page's script ignores the second click (static/js/app.js); this is the
server's half, for a browser without the script. Each such form carries a one-time ``form_id``;
the service that creates the secret claims it (a ``FormReceipt``) in its own transaction, before
anything else, so a second post of the same form, at the same moment or later, is refused with
``AlreadySubmitted`` naming what the first one made, whatever else changed since. A refused first
post (a bad name) rolls the claim back with everything else: the corrected form posts again.

A receipt is kept FORM_RECEIPT_RETENTION, then the daily retention purge deletes it
(``form_receipts_purge``): a second post comes seconds after the first, or from the browser's
history the same day. A post of the form after that is a new one, and refused as any other
repeat would be ("A token with this name already exists.").
"""

from __future__ import annotations

import logging
import re
import secrets
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models.functions import Now

from tenants.models import FormReceipt, Tenant, User

log = logging.getLogger("tenants.once_forms")

FORM_ID_RE = re.compile(r"^[A-Za-z0-9_-]{16,64}$")

FORM_RECEIPT_RETENTION = timedelta(days=1)


class AlreadySubmitted(Exception):
    """This form was posted before and made ``receipt.object_id``; nothing was done now."""

    def __init__(self, receipt: FormReceipt):
        super().__init__(receipt.action)
        self.receipt = receipt


def new_form_id() -> str:
    return secrets.token_urlsafe(18)


def form_claim(
    *, tenant: Tenant, form_id: str, action: str, actor: User | None
) -> FormReceipt | None:
    """Claim ``form_id`` inside the caller's transaction; None for a post without one (an older
    page, a command, the API), which is not guarded. A post of the same form that is still running
    holds the claim: this waits for it, and is refused if it committed. An id another form
    (another action) claimed is not a second post of this one, only a hand-made request: it is
    not guarded either, rather than told that this form made the other form's object."""
    if not FORM_ID_RE.match(form_id or ""):
        return None
    try:
        with transaction.atomic():
            return FormReceipt.objects.create(
                tenant=tenant, form_id=form_id, action=action, actor=actor
            )
    except IntegrityError:
        receipt = FormReceipt.objects.get(tenant=tenant, form_id=form_id)
    if receipt.action != action:
        return None
    raise AlreadySubmitted(receipt)


def form_done(receipt: FormReceipt | None, object_id: object) -> None:
    """Record on the claim what the form made (in the same transaction as the claim)."""
    if receipt is None:
        return
    receipt.object_id = str(object_id)
    receipt.save(update_fields=["object_id"])


def form_receipts_purge(*, retention: timedelta = FORM_RECEIPT_RETENTION) -> int:
    """Delete the receipts made more than ``retention`` ago (daily, with the retention purge).
    Safe to run anywhere, any number of times. Returns how many were deleted."""
    deleted, _rows = FormReceipt.objects.filter(created_at__lt=Now() - retention).delete()
    if deleted:
        log.info("tenants.form_receipts.purged", extra={"deleted": deleted})
    return deleted
