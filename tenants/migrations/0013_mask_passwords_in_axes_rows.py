"""Failed sign-in checks written before ``AXES_SENSITIVE_PARAMETERS`` named the password page's
fields kept that page's form in clear (``axes_accessattempt.post_data``): a mistyped current
password, the new password twice, and the CSRF form token. Every value of such a row is masked
here, as axes now masks them when it writes (every field of that page is sensitive). Rows of the
sign-in page are left as they are: axes already masked their password."""

from django.db import migrations
from django.db.models import Q

MASK = "********************"
PAGE_FIELDS = ("old_password=", "new_password1=", "new_password2=")


def mask_row(post_data: str) -> str:
    """Each ``key=value`` line with its value masked; a line without ``=`` (the rest of a value
    that held a line break) is dropped."""
    masked = []
    for line in post_data.splitlines():
        key, equals, _ = line.partition("=")
        if equals:
            masked.append(f"{key}={MASK}")
    return "\n".join(masked)


def mask_password_page_rows(apps, schema_editor):
    AccessAttempt = apps.get_model("axes", "AccessAttempt")
    page_rows = Q()
    for field in PAGE_FIELDS:
        page_rows |= Q(post_data__contains=field)
    for row in AccessAttempt.objects.filter(page_rows).only("pk", "post_data").iterator():
        AccessAttempt.objects.filter(pk=row.pk).update(post_data=mask_row(row.post_data))


class Migration(migrations.Migration):
    dependencies = [
        ("tenants", "0012_auditevent_actor_label"),
        ("axes", "0010_accessattemptexpiration"),
    ]

    operations = [migrations.RunPython(mask_password_page_rows, migrations.RunPython.noop)]
