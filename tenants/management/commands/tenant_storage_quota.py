from django.core.management.base import CommandError

from common.cli import BaseCommand, text
from tenants.onboarding import storage_quota_parsed, tenant_storage_quota_set
from tenants.services import AdminError


class Command(BaseCommand):
    help = (
        "Give a tenant its own attachment storage quota (--bytes), or put it back on the "
        "deployment's TENANT_ATTACHMENT_STORAGE_BYTES (--default). A quota below what the "
        "tenant holds deletes nothing: its new files are refused until retention frees room. "
        "The tenant's admins see the change in their audit log."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug", type=text, help="the tenant's slug")
        choice = parser.add_mutually_exclusive_group(required=True)
        choice.add_argument(
            "--bytes",
            type=text,
            metavar="N",
            help="the quota in bytes (21474836480 for 20 GiB), within the setting's bounds",
        )
        choice.add_argument(
            "--default", action="store_true", help="use the deployment's quota again"
        )

    def handle(self, *args, **options):
        try:
            quota = None if options["default"] else storage_quota_parsed(options["bytes"])
            tenant = tenant_storage_quota_set(slug=options["slug"], quota_bytes=quota)
        except AdminError as error:
            prefix = "--bytes: " if error.field == "bytes" else ""
            raise CommandError(prefix + error.message) from None
        whose = "the deployment's" if quota is None else "its own"
        self.stdout.write(
            f"{tenant.name} ({tenant.slug}) may hold {tenant.attachment_storage_quota} bytes "
            f"of attachments ({whose} quota)"
        )
