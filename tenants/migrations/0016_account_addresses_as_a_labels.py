from django.db import migrations

from common.addresses import account_lookup_form


def domains_as_a_labels(apps, schema_editor):
    """Accounts and pending invitations whose address was stored with its domain in Unicode (as
    Django's validate_email took it) get the form sign-in now looks addresses up by (its IDNA
    A-label, common.addresses.account_lookup_form), so that they keep signing in and can still
    be accepted. An account whose new form is another account's address (a look-alike of it,
    such as a full-width letter) keeps its own: it no longer signs in with a password, and an
    operator decides which of the two is the person's."""
    User = apps.get_model("tenants", "User")
    Invitation = apps.get_model("tenants", "Invitation")
    for user in User.objects.filter(email__regex=r"[^\x01-\x7f]").order_by("pk"):
        form = account_lookup_form(user.email)
        if form != user.email and not User.objects.filter(email=form).exists():
            User.objects.filter(pk=user.pk).update(email=form)
    for invitation in Invitation.objects.filter(
        state="pending", email__regex=r"[^\x01-\x7f]"
    ).order_by("pk"):
        form = account_lookup_form(invitation.email)
        taken = Invitation.objects.filter(
            tenant_id=invitation.tenant_id, state="pending", email=form
        )
        if form != invitation.email and not taken.exists():
            Invitation.objects.filter(pk=invitation.pk).update(email=form)


class Migration(migrations.Migration):
    dependencies = [
        ("tenants", "0015_agentmail_client_id"),
    ]

    operations = [migrations.RunPython(domains_as_a_labels, migrations.RunPython.noop)]
