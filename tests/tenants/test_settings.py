"""Production settings: refuse to start without secrets, and pass `check --deploy` when given them."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]

PRODUCTION_ENV = {
    "COUNTERSIGN_ENV": "production",
    "SECRET_KEY": "p" * 20 + "-production-test-secret-key-0123456789abcdefghij",
    "ALLOWED_HOSTS": "countersign.example.com",
    "AGENTMAIL_BASE_URL": "https://api.agentmail.to",
    "AGENTMAIL_ORG_API_KEY": "am_test_not_a_real_key",
    "PUBLIC_BASE_URL": "https://countersign.example.com",
    "SECRET_ENCRYPTION_KEYS": "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
}


def run_manage(*args, env):
    return run_python("manage.py", *args, env=env)


def clean_env(env):
    # A clean production environment: nothing the test session set for itself (browser tests lift
    # Django's async guard for the session, which check --deploy rightly refuses).
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in PRODUCTION_ENV and k != "DJANGO_ALLOW_ASYNC_UNSAFE"
    }
    return {**base, **env}


def run_python(*args, env):
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=clean_env(env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_refuses_to_start_without_secret_key():
    env = {k: v for k, v in PRODUCTION_ENV.items() if k != "SECRET_KEY"}
    env["DATABASE_URL"] = settings.DATABASE_URL
    result = run_manage("check", env=env)
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_production_refuses_to_start_without_database_url():
    result = run_manage("check", env=dict(PRODUCTION_ENV))
    assert result.returncode != 0
    assert "DATABASE_URL must be set" in result.stderr


def test_production_refuses_to_start_with_debug_on():
    env = {**PRODUCTION_ENV, "DATABASE_URL": settings.DATABASE_URL, "DEBUG": "true"}
    result = run_manage("check", env=env)
    assert result.returncode != 0
    assert "DEBUG must be off when COUNTERSIGN_ENV=production" in result.stderr


def test_production_refuses_a_negative_proxy_count():
    env = {**PRODUCTION_ENV, "DATABASE_URL": settings.DATABASE_URL, "TRUSTED_PROXY_COUNT": "-1"}
    result = run_manage("check", env=env)
    assert result.returncode != 0
    assert "TRUSTED_PROXY_COUNT must be at least 0, got -1" in result.stderr


def test_check_deploy_is_clean_in_production():
    env = {**PRODUCTION_ENV, "DATABASE_URL": settings.DATABASE_URL}
    result = run_manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        # Past AgentMail's 24 h key memory a retry is a second send: counted twice at 48 h.
        ("SEND_SAFE_WINDOW_SECONDS", "172800", "SEND_SAFE_WINDOW_SECONDS must be at least 60"),
        ("SEND_BATCH_SIZE", "0", "SEND_BATCH_SIZE must be at least 1 and at most 1000, got 0"),
        ("SEND_BURST_PER_KEY", "0.5", "SEND_BURST_PER_KEY must be at least 1"),
        ("AGENTMAIL_READ_TIMEOUT", "-1", "AGENTMAIL_READ_TIMEOUT must be at least 0.001"),
        ("DB_HEALTH_CHECK_GRACE", "abc", "DB_HEALTH_CHECK_GRACE must be a number, got 'abc'"),
        ("Q_POLL", "nan", "Q_POLL must be a finite number"),
        ("LOG_LEVEL", "LOUD", "LOG_LEVEL must be DEBUG, INFO, WARNING, ERROR or CRITICAL"),
        ("SECRET_ENCRYPTION_KEYS", "garbage", "each SECRET_ENCRYPTION_KEYS entry must be"),
        # Found by an outside probe (the operator): these were taken as given. A fan-out page of
        # 0 marked an approved broadcast "completed" with nothing sent (the sandbox got none).
        ("BROADCAST_FANOUT_PAGE", "0", "BROADCAST_FANOUT_PAGE must be at least 1"),
        ("BROADCAST_FANOUT_PAGE_PAUSE_SECONDS", "-1", "_PAUSE_SECONDS must be at least 0"),
        ("BROADCAST_KEY_SHARE", "2", "BROADCAST_KEY_SHARE must be at least 0.001 and at most 1"),
        # 0: every agent request was a 429; 0 threads: every MCP tool call failed.
        ("API_RATE_LIMIT_PER_MINUTE", "0", "API_RATE_LIMIT_PER_MINUTE must be at least 1"),
        ("MCP_THREADS", "0", "MCP_THREADS must be at least 1"),
        # Past 3 MiB of files a send exceeds AgentMail's 6 MB: refused after the approval.
        ("ATTACHMENT_MAX_DRAFT_BYTES", "8388608", "ATTACHMENT_MAX_DRAFT_BYTES must be at least"),
        # 0 minutes: axes forgot every failure at once, so the sign-in throttle never locked.
        ("AXES_COOLOFF_MINUTES", "0", "AXES_COOLOFF_MINUTES must be at least 1"),
        ("Q_RETRY", "60", "Q_RETRY must be more than Q_TIMEOUT (120), got 60"),
        # 0 took the wait out of the authenticator code throttle: guesses as fast as they came.
        ("OTP_TOTP_THROTTLE_FACTOR", "0", "OTP_TOTP_THROTTLE_FACTOR must be at least 1, got 0"),
    ],
)
def test_a_setting_out_of_its_range_stops_the_start_naming_it(variable, value, said):
    env = {**PRODUCTION_ENV, "DATABASE_URL": settings.DATABASE_URL, variable: value}
    result = run_manage("check", env=env)
    assert result.returncode != 0
    assert said in result.stderr


# Found by an outside probe (the operator): each was taken as given and turned a safety off
# without a word. 0 calls per key or run, or a window no send fits in, and the backfill never
# looked anything up; a negative pace was unpaced; 0 scan pages or seconds and reconciling never
# listed the inbox. The old name of the proxy count was refused under the new one's name.
SAFETY_LIMITS = {
    "WEBHOOK_BACKFILL_CALLS_PER_KEY=0": "WEBHOOK_BACKFILL_CALLS_PER_KEY must be at least 1, got 0",
    "WEBHOOK_BACKFILL_MAX_CALLS=0": "WEBHOOK_BACKFILL_MAX_CALLS must be at least 1, got 0",
    "WEBHOOK_BACKFILL_CALLS_PER_SECOND=-1": "WEBHOOK_BACKFILL_CALLS_PER_SECOND must be at least 0, got -1.0",
    "WEBHOOK_BACKFILL_MAX_AGE_HOURS=0": "WEBHOOK_BACKFILL_MAX_AGE_HOURS must be at least 1, got 0.0",
    "WEBHOOK_BACKFILL_AFTER_SECONDS=7200 WEBHOOK_BACKFILL_MAX_AGE_HOURS=2": (
        "WEBHOOK_BACKFILL_MAX_AGE_HOURS must be more than WEBHOOK_BACKFILL_AFTER_SECONDS (7200 s), "
        "got 2 hours"
    ),
    "AGENTMAIL_LOOKUP_SCAN_PAGES=0": "AGENTMAIL_LOOKUP_SCAN_PAGES must be at least 1, got 0",
    "AGENTMAIL_LOOKUP_SCAN_SECONDS=0": "AGENTMAIL_LOOKUP_SCAN_SECONDS must be at least 1, got 0.0",
    "DB_CONN_MAX_AGE=-1": "DB_CONN_MAX_AGE must be at least 0, got -1",
    "SECURE_HSTS_SECONDS=-1": "SECURE_HSTS_SECONDS must be at least 0, got -1",
    "AXES_PROXY_COUNT=-1": "AXES_PROXY_COUNT must be at least 0, got -1",
}


def test_a_safety_limit_set_to_nothing_stops_the_start_naming_it():
    """The settings alone, each case in its own process, all at once: seconds, not one each."""
    production = {**PRODUCTION_ENV, "DATABASE_URL": settings.DATABASE_URL}
    processes = {
        case: subprocess.Popen(
            [sys.executable, "-c", "import config.settings"],
            cwd=ROOT,
            env=clean_env({**production, **dict(pair.split("=") for pair in case.split())}),
            stderr=subprocess.PIPE,
            text=True,
        )
        for case in SAFETY_LIMITS
    }
    last_lines = {
        case: process.communicate(timeout=120)[1].strip().splitlines()[-1:]
        for case, process in processes.items()
    }
    assert last_lines == {
        case: [f"django.core.exceptions.ImproperlyConfigured: {said}"]
        for case, said in SAFETY_LIMITS.items()
    }


@pytest.mark.parametrize(
    "url", ["postgres://cs:hunter2-secret@db.internal:port/cs", "hunter2-secret@db.internal/cs"]
)
def test_a_malformed_database_url_is_named_and_its_password_never_shown(url):
    """It ended in dj_database_url's ParseError or UnknownSchemeError, naming no variable."""
    result = run_manage("check", env={**PRODUCTION_ENV, "DATABASE_URL": url})
    assert result.returncode != 0
    assert result.stderr.splitlines()[-1].startswith(
        "django.core.exceptions.ImproperlyConfigured: DATABASE_URL must be a URL like postgres://"
    )
    assert "hunter2" not in result.stdout + result.stderr


@pytest.mark.parametrize("entry", ["config.wsgi", "config.asgi"])
def test_a_web_process_refuses_to_start_with_a_broken_key_ring(entry):
    """gunicorn runs no system checks: a web process with a key id given twice used to start,
    then fail every request that opened a secret (webhooks, SSO sign-ins)."""
    ring = "k1:" + "A" * 43 + "=,k1:" + "B" * 43 + "="
    env = {**PRODUCTION_ENV, "DATABASE_URL": settings.DATABASE_URL, "SECRET_ENCRYPTION_KEYS": ring}
    result = run_python("-c", f"import {entry}", env=env)
    assert result.returncode != 0
    assert result.stderr.splitlines()[-1] == (
        "django.core.exceptions.ImproperlyConfigured: "
        "SECRET_ENCRYPTION_KEYS: key id 'k1' appears twice"
    )
    assert "AAAA" not in result.stderr
