"""Peers for side-by-side runs: django-post-office and django-anymail, on their own database.

Nothing of theirs is imported by the product; this module exists only for `python -m bench`.
The product apps are installed too, so one server process serves both webhook endpoints.
"""

from bench.settings import *  # noqa: F403
from bench.settings import DATABASES, INSTALLED_APPS, env

DATABASES["default"]["NAME"] = env("BENCH_PEERS_DB_NAME", "bench_peers")
DATABASES["default"]["TEST"] = {"NAME": "test_" + DATABASES["default"]["NAME"]}
INSTALLED_APPS = [*INSTALLED_APPS, "post_office", "anymail"]
ROOT_URLCONF = "bench.urls_peers"

# post-office defaults except the backend: BATCH_SIZE 100, 5 threads per process, LOG_LEVEL 2.
# "agentmail" is the additional HTTP row's backend, chosen per email (`backend="agentmail"`).
POST_OFFICE = {
    "BACKENDS": {
        "default": "bench.backends.SleepBackend",
        "agentmail": "bench.backends.AgentMailBackend",
    }
}
EMAIL_BACKEND = "bench.backends.SleepBackend"

# anymail's Resend tracking webhook verifies Svix signatures with this secret (no basic auth).
ANYMAIL = {
    "RESEND_SIGNING_SECRET": env(
        "BENCH_RESEND_SECRET", "whsec_YmVuY2gtcmVzZW5kLXNpZ25pbmctc2VjcmV0"
    )
}

# post-office logs every batch at INFO through its own handler; keep the table readable.
# (post-office installs its own INFO handler unless its logger already has one.)
LOGGING = {
    **LOGGING,  # noqa: F405
    "loggers": {"post_office": {"handlers": ["console"], "level": "WARNING", "propagate": False}},
}
