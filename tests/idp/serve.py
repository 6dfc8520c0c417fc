"""Start the test identity provider: migrate its SQLite file, create the one person and the one
client application the test asked for (from the environment), then serve on the given port.

python -m tests.idp.serve  (the fixture runs it; see tests/tenants/oidc_fixtures.py)
"""

import os

import django


def main() -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.idp.settings"
    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from oauth2_provider.models import get_application_model

    call_command("migrate", verbosity=0, interactive=False)
    user_model = get_user_model()
    for spec in filter(None, os.environ.get("IDP_USERS", "").split(";")):
        username, email, password = spec.split(",")
        user_model.objects.create_user(username=username, email=email, password=password)
    get_application_model().objects.create(
        name="Countersign",
        client_id=os.environ["IDP_CLIENT_ID"],
        client_secret=os.environ["IDP_CLIENT_SECRET"],
        client_type="confidential",
        authorization_grant_type="authorization-code",
        redirect_uris=os.environ["IDP_REDIRECT_URI"],
        algorithm="RS256",
        skip_authorization=True,
    )
    call_command("runserver", f"127.0.0.1:{os.environ['IDP_PORT']}", use_reloader=False)


if __name__ == "__main__":
    main()
