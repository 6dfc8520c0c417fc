"""Django's ``createsuperuser``, recorded: an operator's account (every right in the operators'
admin, where people's passwords and addresses can be changed) now leaves an audit row, without a
tenant as it belongs to none (the operators' admin lists it). Django's own left nothing. The row
is written once the account exists, not in its transaction: Django's command asks its questions
between the two, and a transaction must not wait on a person typing.
This app comes before ``django.contrib.auth`` in INSTALLED_APPS so that this command wins."""

import argparse
import os

from django.contrib.auth.management.commands import createsuperuser
from django.core.management.base import CommandError

from common.addresses import operator_account_address
from common.cli import (
    PASSWORD_NOT_UTF8,
    MigratedDatabase,
    OptionsOnce,
    password_not_utf8,
    text,
)
from tenants.models import User
from tenants.onboarding import operator_account_created


class Command(MigratedDatabase, OptionsOnce, createsuperuser.Command):
    def handle(self, *args, **options):
        password = os.environ.get("DJANGO_SUPERUSER_PASSWORD", "")
        if not options["interactive"] and password_not_utf8(password):
            raise CommandError(
                f"DJANGO_SUPERUSER_PASSWORD: {PASSWORD_NOT_UTF8}; no account was made."
            )
        known = set(User.objects.filter(is_superuser=True).values_list("pk", flat=True))
        try:
            super().handle(*args, **options)
        except EOFError:  # Ctrl-D at a prompt (Django's command says Ctrl-C itself)
            raise CommandError("Aborted; no account was made.") from None
        except UnicodeEncodeError:
            # A password typed at Django's prompt, which the hasher cannot encode before the
            # account is saved: the address went through _validate_username, and no other field
            # is asked (REQUIRED_FIELDS is empty).
            raise CommandError(f"{PASSWORD_NOT_UTF8}; no account was made.") from None
        for user in User.objects.filter(is_superuser=True).exclude(pk__in=known):
            operator_account_created(user=user)

    def _validate_username(self, username, verbose_field_name, database):
        """Django's check, which looks the address up as typed before validating it: a NUL or a
        byte that is not UTF-8 (``--email``, ``DJANGO_SUPERUSER_EMAIL``, the prompt) reached the
        query as a DataError or UnicodeEncodeError, and ``Ana@X.test`` beside ``ana@x.test`` was
        not found, then stored in lower case: an IntegrityError. Both were tracebacks. The
        address is looked up, and checked by Django, in the form it is stored in."""
        if username:
            try:
                text(username)
            except argparse.ArgumentTypeError as error:
                return f"Error: {verbose_field_name}: {error}"
            # The form the account is stored in (UserManager.create_superuser): a full-width
            # "root@\uff43ountersign.test" is root@countersign.test, taken; a local part that
            # could pass for another is refused saying why, as an invitation is.
            try:
                address = operator_account_address(username)
            except ValueError as error:
                return f"Error: {verbose_field_name}: {error}"
            if User.objects.db_manager(database).filter(email=address).exists():
                return f"Error: That {verbose_field_name} is already taken."
            username = address
        return super()._validate_username(username, verbose_field_name, database)
