"""Django's ``changepassword``, for this product's accounts: found by address whatever its case,
and recorded. Django's own saved the new password and nothing else: no audit row in any tenant of
the person, and their sessions kept going (``tenants.passwords.password_set_by_operator``).
This app comes before ``django.contrib.auth`` in INSTALLED_APPS so that this command wins."""

import getpass

from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from common.cli import PASSWORD_NOT_UTF8, BaseCommand, password_not_utf8, shown, text
from tenants.models import User
from tenants.passwords import password_set_by_operator

MAX_TRIES = 3


class Command(BaseCommand):
    requires_system_checks: list[str] = []
    help = (
        "Set a new password for one account (asked twice, checked by the password validators). "
        "Every session of the person ends, and each tenant they belong to gets an audit row. "
        "Confirm who is asking before you run it."
    )

    def add_arguments(self, parser):
        parser.add_argument("username", type=text, help="the account's sign-in address")

    def handle(self, *args, **options):
        email = options["username"].strip().lower()
        user = User.objects.filter(email=email).first()
        if user is None:
            raise CommandError(f"No account has the address {shown(email)}.")
        self.stdout.write(f"Changing password for user '{user.email}'")
        password = self._ask(user)
        ended = password_set_by_operator(user=user, password=password)
        return (
            f"Password changed successfully for user '{user.email}'; ended {ended} session(s), "
            "recorded in the audit log of each of their tenants"
        )

    def _ask(self, user: User) -> str:
        for _ in range(MAX_TRIES):
            first = _asked("Password: ")
            second = _asked("Password (again): ")
            if first != second:
                self.stdout.write("Passwords do not match. Please try again.")
                continue
            if password_not_utf8(second):
                self.stderr.write(f"{PASSWORD_NOT_UTF8}. Please try again.")
                continue
            try:
                validate_password(second, user)
            except ValidationError as error:
                self.stderr.write("\n".join(error.messages))
                continue
            return second
        raise CommandError(
            f"Aborting password change for user '{user.email}' after {MAX_TRIES} attempts"
        )


def _asked(prompt: str) -> str:
    try:
        password = getpass.getpass(prompt=prompt)
    except (EOFError, KeyboardInterrupt):  # Ctrl-D, Ctrl-C: tracebacks
        raise CommandError("Aborted; the password was not changed.") from None
    if not password:
        raise CommandError("aborted")
    return password
