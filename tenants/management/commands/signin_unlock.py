from django.core.management.base import CommandError

from common.cli import BaseCommand, text
from tenants.services import AdminError
from tenants.signin_lockouts import signin_lockout_release


class Command(BaseCommand):
    help = (
        "Release the sign-in lock-outs of one sign-in address (django-axes locks an address and "
        "client address together after AXES_FAILURE_LIMIT failed sign-ins) before their "
        "cool-off ends: from every client address, or only --ip. Each tenant of the person gets "
        "an audit row; axes' log of the failures stays. Confirm who is asking before you run it. "
        "An address with no lock-out (or an --ip that is not an address) is refused (exit code "
        "1) and nothing changes. A client's pause for failing on SIGNIN_FAILED_ACCOUNTS_PER_MINUTE "
        "accounts is not touched: it ends on its own within a minute."
    )

    def add_arguments(self, parser):
        parser.add_argument("email", type=text, help="the sign-in address that is locked out")
        # Checked by the service, not argparse: an address that is not one is a refusal (exit
        # code 1) like a pair with no lock-out, not a usage error.
        parser.add_argument(
            "--ip", metavar="ADDRESS", help="release only the lock-out from this client address"
        )

    def handle(self, *args, **options):
        try:
            email, released = signin_lockout_release(email=options["email"], ip=options["ip"])
        except AdminError as error:
            raise CommandError(error.message) from None
        self.stdout.write(
            f"released the sign-in lock-outs of {email} from {len(released)} client "
            f"address(es): {', '.join(released)}; recorded in the audit log"
        )
