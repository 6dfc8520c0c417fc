"""Settings of the test identity provider (see tests/idp/__init__.py). Everything comes from the
environment the fixture sets; its database is a throw-away SQLite file (it stands for somebody
else's server, not for ours)."""

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
SECRET_KEY = os.environ["IDP_SECRET_KEY"]
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "tests.idp.urls"
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [HERE / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["IDP_DB"]}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
LOGIN_URL = "/accounts/login/"
# Its own cookie names: the browser talks to this server and to ours on the same host name.
SESSION_COOKIE_NAME = "idp_session"
CSRF_COOKIE_NAME = "idp_csrf"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": os.environ["IDP_RSA_KEY"],
    "OIDC_ISS_ENDPOINT": os.environ["IDP_ISSUER"],
    "OAUTH2_VALIDATOR_CLASS": "tests.idp.validators.EmailClaims",
    "SCOPES": {"openid": "OpenID Connect", "email": "E-mail address", "profile": "Name"},
    "PKCE_REQUIRED": True,
}
