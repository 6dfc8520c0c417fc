"""Product settings for benchmark processes: config.settings on a private database.

Only what a benchmark must change is changed, and each change is named in BENCHMARKS.md:
the database name (bench runs never touch the development or test databases), DEBUG off (Django
would otherwise keep every query in memory), INFO logs off (one line per send would be measured
as stderr writes), and the agent API's per-token rate limit (the load generator is one token).
"""

from config.settings import *  # noqa: F403
from config.settings import DATABASES, env

DEBUG = False
DATABASES["default"]["NAME"] = env("BENCH_DB_NAME", "bench")
DATABASES["default"]["TEST"] = {"NAME": "test_" + DATABASES["default"]["NAME"]}
API_RATE_LIMIT_PER_MINUTE = 10**9
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("BENCH_LOG_LEVEL", "WARNING")},
    # The outage scenario opens the circuit breaker on purpose; the JSON records it.
    "loggers": {"intents.sending": {"level": "ERROR"}},
}
