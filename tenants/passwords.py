"""A signed-in person changing their own password (the account pages), and an operator setting
one (``manage.py changepassword``, the operators' admin). There is no reset by e-mail: the product
sends people no e-mail; a person who forgot theirs asks an operator."""

from __future__ import annotations

from django.db import transaction
from django.http import HttpRequest

from tenants.models import User
from tenants.signin_audit import signin_audit
from tenants.two_factor import second_step_back_off_end
from tenants.user_sessions import sessions_end_all


def password_change(
    *, user: User, password: str, keep_session_key: str | None, request: HttpRequest | None = None
) -> int:
    """Set ``user``'s new password (the caller checked the current one and the validators) and
    end every other session of theirs: whoever signed in with the old password is out, and the
    back-off they built on the second step ends with it (``second_step_back_off_end``). Returns
    how many sessions ended."""
    user.set_password(password)  # before the transaction: hashing is slow on purpose
    with transaction.atomic():
        user.save(update_fields=["password"])
        ended = sessions_end_all(user=user, keep_key=keep_session_key)
        back_off = second_step_back_off_end(user=user)
        signin_audit(
            action="signin.password_changed",
            user=user,
            request=request,
            data={
                "sessions_ended": ended,
                **({"second_step_back_off_ended": True} if back_off else {}),
            },
        )
    return ended


def password_set_by_operator(*, user: User, password: str) -> int:
    """An operator's ``manage.py changepassword`` (the caller checked the validators): the new
    password, every session of the person ended, and an audit row in each of their tenants, as
    for a change of their own. Returns how many sessions ended."""
    user.set_password(password)  # before the transaction: hashing is slow on purpose
    with transaction.atomic():
        user.save(update_fields=["password"])
        return operator_password_recorded(user=user, actor=None)


def operator_password_recorded(
    *, user: User, actor: User | None, request: HttpRequest | None = None
) -> int:
    """What follows an operator's setting of ``user``'s password, in the transaction that saved
    it: every session of the person ends (the operator's own, when it is theirs, stays) and each
    tenant of theirs gets an audit row. A person may belong to several tenants: whoever reads
    any of their audit logs must see that someone else chose this password. ``actor``: the
    operator signed in to the admin, or None from the command line."""
    keep = request.session.session_key if request is not None and actor == user else None
    ended = sessions_end_all(user=user, keep_key=keep)
    back_off = second_step_back_off_end(user=user)
    signin_audit(
        action="signin.password_operator_set",
        user=user,
        actor=actor,
        request=request,
        data={
            "sessions_ended": ended,
            **({"second_step_back_off_ended": True} if back_off else {}),
        },
    )
    return ended
