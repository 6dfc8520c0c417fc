"""A signed-in person changing their own password (the account pages). There is no reset by
e-mail: the product sends people no e-mail; a person who forgot theirs asks an operator."""

from __future__ import annotations

from django.db import transaction
from django.http import HttpRequest

from tenants.models import User
from tenants.signin_audit import signin_audit
from tenants.user_sessions import sessions_end_all


def password_change(
    *, user: User, password: str, keep_session_key: str | None, request: HttpRequest | None = None
) -> int:
    """Set ``user``'s new password (the caller checked the current one and the validators) and
    end every other session of theirs: whoever signed in with the old password is out. Returns
    how many sessions ended."""
    user.set_password(password)  # before the transaction: hashing is slow on purpose
    with transaction.atomic():
        user.save(update_fields=["password"])
        ended = sessions_end_all(user=user, keep_key=keep_session_key)
        signin_audit(
            action="signin.password_changed",
            user=user,
            request=request,
            data={"sessions_ended": ended},
        )
    return ended
