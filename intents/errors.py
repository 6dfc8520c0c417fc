"""Business refusals raised by intents services. Views map them to a message, the API to
problem+json; ``code`` is a stable slug clients may branch on, ``field`` names the input at fault."""

from __future__ import annotations


class DraftError(Exception):
    code = "draft_error"
    status = 409

    def __init__(self, code: str | None = None, message: str = "", field: str | None = None):
        if code:
            self.code = code
        self.message = message or self.code.replace("_", " ")
        self.field = field
        super().__init__(self.message)

    def as_dict(self) -> dict:
        return {"code": self.code, "message": self.message, "field": self.field}


class NotFound(DraftError):
    """Missing, or belonging to another tenant: the same answer for both."""

    code = "not_found"
    status = 404


class InvalidInput(DraftError):
    code = "invalid"
    status = 422


class RecipientRefused(InvalidInput):
    """An address is invalid, outside the mailbox policy or suppressed; the message names it."""

    def __init__(self, code: str, message: str, field: str | None = None, address: str = ""):
        super().__init__(code, message, field)
        self.address = address

    def as_dict(self) -> dict:
        return {**super().as_dict(), "address": self.address}


class StaleVersion(DraftError):
    code = "stale_version"


class VersionConflict(StaleVersion):
    """A new version was based on one that is no longer current: someone saved in between."""

    code = "version_conflict"

    def __init__(self, message: str, *, base_version: int, current_version: int):
        super().__init__(message=message, field="base_version")
        self.base_version = base_version
        self.current_version = current_version


class CustomerWroteAgain(DraftError):
    """The customer wrote in the thread after the draft, in a message the approver was not shown:
    the reply may no longer fit."""

    code = "customer_wrote_again"


class NotPending(DraftError):
    """The draft is no longer in review. Raised from the draft's row (``not_pending``), it also
    says what happened, for a page to put in its reader's words: ``state`` (the draft's status
    now), ``version`` (its current version, the one decided), ``decided_at`` and ``decided_by``
    (a user, or None for the agent, the deadline or an unknown person)."""

    code = "not_pending"

    def __init__(
        self,
        code: str | None = None,
        message: str = "",
        field: str | None = None,
        *,
        state: str | None = None,
        version: int | None = None,
        decided_at=None,
        decided_by=None,
    ):
        super().__init__(code, message, field)
        self.state = state
        self.version = version
        self.decided_at = decided_at
        self.decided_by = decided_by


class LookalikeRecipient(DraftError):
    """A recipient holds letters outside ASCII, which a list shows as the plain address they look
    like: approved only on the draft's page, which names each of them."""

    code = "lookalike_recipient"


class AnsweredMessageGone(DraftError):
    """The message a reply answers was in an inbox deleted at AgentMail (the mailbox's inbox
    was made again, empty): AgentMail's reply route would answer 404."""

    code = "answered_message_gone"


class RecipientNotOnThread(DraftError):
    """A recipient wrote none of the customer messages of the draft's thread (another customer,
    say): the draft's page says so beside the address, a list does not, so it is approved only
    there."""

    code = "recipient_not_on_thread"


class AnsweredAuthorLeftOut(DraftError):
    """The reply goes to none of the author of the message it answers (another participant of
    the thread, say): the draft's page says so, a list does not, so it is approved only there."""

    code = "answered_author_left_out"


class AnsweredByAnotherDraft(DraftError):
    """Another pending or approved draft answers the same customer message: the draft's page
    names it, a list does not, so a second answer to one message is approved only there."""

    code = "answered_by_another_draft"


class ThreadOfSeveralOrganisations(DraftError):
    """The draft's thread holds customer messages from more than one address domain (a stranger
    joined it): whose conversation a reply carries is for the draft's page, not a list."""

    code = "thread_of_several_organisations"


class ForwardedFileOfOther(DraftError):
    """A forwarded file came from a message whose author is not among the reply's recipients:
    the draft's page names its source beside it, a list does not."""

    code = "forwarded_file_of_other"


class ReaderDependentStyles(DraftError):
    """The HTML body's own CSS shows it otherwise to some readers (a phone's width, dark mode:
    ``intents.html_styles.reader_looks``): the draft's page names them and shows the phone's
    look, a list does not."""

    code = "reader_dependent_styles"


class MisleadingLink(DraftError):
    """A link of the HTML body shows one address and leads to another, or runs or carries
    something (``intents.html_links``): the draft's page lists each link's target, a list
    shows none."""

    code = "misleading_link"


class InvisibleCharacters(DraftError):
    """The subject or a body holds characters nobody sees or that reorder the others
    (``intents.policy.invisible_in_content``): the draft's page names them, a list does not."""

    code = "invisible_characters"


class LookalikeHost(DraftError):
    """The subject or a body names a domain that may read as another (``intents.policy.
    lookalike_hosts_in_content``): a mail client makes a link of it; the draft's page names it
    with its other form, a list shows it as drawn."""

    code = "lookalike_host"


class HtmlUnchanged(DraftError):
    """The text body changed since a version whose HTML body is still the current one
    (``intents.selectors.drafts.html_unchanged_while_text_changed``): most mail clients show the
    HTML, so the correction may not reach the customer. The draft's page says so beside both
    bodies, a list shows neither."""

    code = "html_unchanged"


class NoRight(DraftError):
    code = "no_right"
    status = 403


class TokenRevoked(NoRight):
    """The agent token was revoked (or expired) after its request was authenticated."""

    code = "token_revoked"
    status = 401


class TenantInactive(DraftError):
    code = "tenant_inactive"
    status = 403


class MailboxInactive(DraftError):
    code = "mailbox_inactive"


class SecondApproverRequired(DraftError):
    code = "second_approver_required"
    status = 403


class IntentError(DraftError):
    """A send intent is not in a state that allows the requested transition."""

    code = "intent_state"


class HeldByOther(DraftError):
    """Someone else holds the draft with a claim that has not lapsed; the message names them."""

    code = "held_by_other"


class NotHolder(DraftError):
    """Only the holder (or an admin) may release or hand on a draft."""

    code = "not_holder"
    status = 403


class ProviderUnavailable(DraftError):
    """AgentMail did not answer a read the request needs (not the customer's or agent's fault)."""

    code = "provider_unavailable"
    status = 502


class StorageQuotaExceeded(DraftError):
    """The files a version would store take the tenant past its attachment storage quota
    (``TENANT_ATTACHMENT_STORAGE_BYTES``): 413, the content is larger than the room left."""

    code = "storage_quota_exceeded"
    status = 413


class MailboxStorageQuotaExceeded(StorageQuotaExceeded):
    """The files a version would store take its mailbox past its share of the tenant's quota
    (``MAILBOX_ATTACHMENT_STORAGE_SHARE``). ``extensions``: the mailbox, its bytes in use, its
    bound and the bytes the version would add, as members of the API's problem document."""

    code = "mailbox_storage_quota_exceeded"

    def __init__(self, message: str, *, mailbox: str, used: int, limit: int, added: int):
        super().__init__(message=message, field="attachments")
        self.extensions = {
            "mailbox": mailbox,
            "mailbox_storage_used": used,
            "mailbox_storage_limit": limit,
            "attachments_bytes": added,
        }


class BroadcastRowsInvalid(InvalidInput):
    """Some rows of a broadcast's recipient upload are invalid; ``rows`` lists them (row, field,
    message), the first ``MAX_REPORTED_ERRORS`` of ``total``. ``source``: the input the rows
    came from, ``recipients`` (a JSON list) or ``recipients_csv`` (CSV text), so that an API
    names a row as the caller wrote it."""

    code = "recipients_invalid"

    def __init__(self, message: str, *, rows: list, total: int, source: str = "recipients"):
        super().__init__(message=message, field="recipients")
        self.rows = rows
        self.total = total
        self.source = source

    def as_dict(self) -> dict:
        return {
            **super().as_dict(),
            "total": self.total,
            "source": self.source,
            "rows": [{"row": r.row, "field": r.field, "message": r.message} for r in self.rows],
        }
