from django.core.management.base import CommandError

from common.cli import BaseCommand, text
from tenants.services import AdminError
from tenants.signin_policy import account_reset_two_factor


class Command(BaseCommand):
    help = (
        "Remove every second factor (authenticator, recovery codes, passkeys) of one account and "
        "end its sessions, so the person sets a new factor up at their next sign-in. For a person "
        "who belongs to several tenants: a tenant's admin may reset only a member who belongs to "
        "no other tenant. Confirm who is asking before you run it. A person with no second "
        "factor is refused (exit code 1) and nothing changes."
    )

    def add_arguments(self, parser):
        parser.add_argument("email", type=text, help="the account's sign-in address")

    def handle(self, *args, **options):
        try:
            user, ended = account_reset_two_factor(email=options["email"])
        except AdminError as error:
            raise CommandError(error.message) from None
        self.stdout.write(
            f"removed the second factors of {user.email} and ended {ended} session(s); "
            "they set a new factor up at their next sign-in"
        )
