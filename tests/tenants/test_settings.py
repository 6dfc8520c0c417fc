"""Production settings: refuse to start without secrets, and pass `check --deploy` when given them."""

import os
import runpy
import subprocess
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
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
        # A negative grace was taken as given: a check-every-request setting written wrong.
        ("DB_HEALTH_CHECK_GRACE", "-1", "DB_HEALTH_CHECK_GRACE must be at least 0, got -1.0"),
        ("Q_POLL", "nan", "Q_POLL must be a finite number"),
        ("LOG_LEVEL", "LOUD", "LOG_LEVEL must be DEBUG, INFO, WARNING, ERROR or CRITICAL"),
        ("TRUSTED_PROXY_COUNT", "-1", "TRUSTED_PROXY_COUNT must be at least 0, got -1"),
        # Found by an outside probe (the operator): these were taken as given. A fan-out page of
        # 0 marked an approved broadcast "completed" with nothing sent (the sandbox got none).
        ("BROADCAST_FANOUT_PAGE", "0", "BROADCAST_FANOUT_PAGE must be at least 1"),
        ("BROADCAST_FANOUT_PAGE_PAUSE_SECONDS", "-1", "_PAUSE_SECONDS must be at least 0"),
        ("BROADCAST_KEY_SHARE", "2", "BROADCAST_KEY_SHARE must be at least 0.001 and at most 1"),
        (
            "MAILBOX_ATTACHMENT_STORAGE_SHARE",
            "0",
            "MAILBOX_ATTACHMENT_STORAGE_SHARE must be at least 0.01 and at most 1",
        ),
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
    printed = refusal_printed({variable: value})
    assert printed.splitlines()[-1].startswith("config.env.SettingsError: ")
    assert said in printed.splitlines()[-1]


# Found by an outside probe (the operator): each was taken as given and turned a safety off
# without a word. 0 calls per key or run, or a window no send fits in, and the backfill never
# looked anything up; a negative pace was unpaced; 0 scan pages or seconds and reconciling never
# listed the inbox. The old name of the proxy count was refused under the new one's name.
SAFETY_LIMITS = {
    "WEBHOOK_BACKFILL_CALLS_PER_KEY=0": "WEBHOOK_BACKFILL_CALLS_PER_KEY must be at least 1, got 0",
    "WEBHOOK_BACKFILL_MAX_CALLS=0": "WEBHOOK_BACKFILL_MAX_CALLS must be at least 1, got 0",
    "WEBHOOK_BACKFILL_CALLS_PER_SECOND=-1": "WEBHOOK_BACKFILL_CALLS_PER_SECOND must be at least 0, got -1.0",
    "WEBHOOK_BACKFILL_MAX_AGE_HOURS=0": (
        "WEBHOOK_BACKFILL_MAX_AGE_HOURS must be at least 1 and at most 8760, got 0.0"
    ),
    "WEBHOOK_BACKFILL_AFTER_SECONDS=7200 WEBHOOK_BACKFILL_MAX_AGE_HOURS=2": (
        "WEBHOOK_BACKFILL_MAX_AGE_HOURS must be more than WEBHOOK_BACKFILL_AFTER_SECONDS (7200 s), "
        "got 2 hours"
    ),
    "AGENTMAIL_LOOKUP_SCAN_PAGES=0": "AGENTMAIL_LOOKUP_SCAN_PAGES must be at least 1, got 0",
    "AGENTMAIL_LOOKUP_SCAN_SECONDS=0": "AGENTMAIL_LOOKUP_SCAN_SECONDS must be at least 1, got 0.0",
    "DB_CONN_MAX_AGE=-1": "DB_CONN_MAX_AGE must be at least 0, got -1",
    "SECURE_HSTS_SECONDS=-1": "SECURE_HSTS_SECONDS must be at least 0, got -1",
    "AXES_PROXY_COUNT=-1": "AXES_PROXY_COUNT must be at least 0, got -1",
    # Found by probe 4 (the operator): -1 is "never prepare"; any other negative figure turned
    # prepared statements off as silently.
    "DB_PREPARE_THRESHOLD=-5": "DB_PREPARE_THRESHOLD must be at least -1, got -5",
}


@contextmanager
def environment(variables: dict[str, str]) -> Iterator[None]:
    """This process's environment is ``variables`` alone for the block, then what it was."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(variables)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def production_settings(variables: dict[str, str]) -> dict:
    """config/settings.py run in this process as a production process imports it (the
    production environment, ``variables`` on top): the settings it makes, by name."""
    production = {**PRODUCTION_ENV, "DATABASE_URL": settings.DATABASE_URL, **variables}
    with environment(clean_env(production)):
        return runpy.run_path(str(ROOT / "config" / "settings.py"), run_name="config.settings")


def refusal_printed(variables: dict[str, str]) -> str:
    """What the interpreter prints when ``production_settings`` raises (the traceback, whole,
    ending in the one line that names the variable), "" when the settings are taken."""
    try:
        production_settings(variables)
    except Exception as error:
        return "".join(traceback.format_exception(error))
    return ""


def settings_errors(cases) -> dict[str, str]:
    """Each case (space-separated NAME=value pairs) through ``refusal_printed``. In this process,
    not a process each (a second of CPU apiece, most of this file's time): the settings code is
    the same, and that its refusal stops each kind of process with that line, ``manage.py`` and
    the web processes alike, is shown end to end by the tests of those (the subprocess ones)."""
    return {
        case: refusal_printed(dict(pair.split("=", 1) for pair in case.split())) for case in cases
    }


def last_lines(errors: dict[str, str]) -> dict[str, list[str]]:
    return {case: stderr.strip().splitlines()[-1:] for case, stderr in errors.items()}


def refusals(cases: dict[str, str]) -> dict[str, list[str]]:
    return {case: [f"config.env.SettingsError: {said}"] for case, said in cases.items()}


def test_a_safety_limit_set_to_nothing_stops_the_start_naming_it():
    assert last_lines(settings_errors(SAFETY_LIMITS)) == refusals(SAFETY_LIMITS)


# Found by an outside probe (the operator): a figure past anything meant started, then failed
# where it was used. A sign-in lasting 10^20 s made every sign-in a 500 (OverflowError in the
# session's expiry date); a cool-off of 10^20 minutes stopped the start with an OverflowError that
# named no variable; timeouts past what a socket takes failed every AgentMail call; a backfill
# window of 10^9 hours reached before year 1. 5,000 digits were echoed whole.
PAST_WHAT_RUNS = {
    "SESSION_COOKIE_AGE=" + "1" + "0" * 20: (
        "SESSION_COOKIE_AGE must be at most 1000000000, got 100000000000000000000"
    ),
    "AXES_COOLOFF_MINUTES=" + "1" + "0" * 20: (
        "AXES_COOLOFF_MINUTES must be at most 1000000000, got 100000000000000000000"
    ),
    "AGENTMAIL_READ_TIMEOUT=1e20": "AGENTMAIL_READ_TIMEOUT must be at most 1000000000, got 1e+20",
    "SEND_LEASE_SECONDS=1000000001": "SEND_LEASE_SECONDS must be at most 1000000000, got 1000000001",
    "WEBHOOK_BACKFILL_MAX_AGE_HOURS=1000000": (
        "WEBHOOK_BACKFILL_MAX_AGE_HOURS must be at least 1 and at most 8760, got 1000000.0"
    ),
    "SEND_BATCH_SIZE=" + "9" * 5000: (
        "SEND_BATCH_SIZE must be at most 1000, got a number of 5000 digits"
    ),
    "Q_WORKERS=" + "9" * 5000: "Q_WORKERS must be at most 1000000000, got a number of 5000 digits",
    # Found by probe 4 (the operator): a retry delay was only checked to be finite and not
    # negative. 1e20 s crashed each failed delivery's record (OverflowError, the attempt lost
    # and claimed again), and 1e12 s stored a next attempt in the year 36,000, which psycopg
    # cannot read: every later read of the delivery's row failed (DataError).
    "AGENT_EVENTS_RETRY_DELAYS=30,1e12": (
        "AGENT_EVENTS_RETRY_DELAYS entry 2 must be at most 1000000000 seconds, got 1e+12"
    ),
    "AGENT_EVENTS_RETRY_DELAYS=1e20": (
        "AGENT_EVENTS_RETRY_DELAYS entry 1 must be at most 1000000000 seconds, got 1e+20"
    ),
}


def test_a_figure_past_what_the_code_can_run_stops_the_start_naming_it():
    assert last_lines(settings_errors(PAST_WHAT_RUNS)) == refusals(PAST_WHAT_RUNS)


URL_SAID = "(its value is not shown: it may hold a password)"
# Found by an outside probe (the operator): these started, then failed each call (no scheme), sent
# the organization's AgentMail key in clear (http in production), or stopped the start with a
# ValueError naming no variable (Q_REDIS_URL).
BAD_URLS = {
    "Q_REDIS_URL=redis://[::1": f"Q_REDIS_URL must be a URL like redis://host:6379/0 {URL_SAID}",
    "Q_REDIS_URL=hunter2": f"Q_REDIS_URL must be a URL like redis://host:6379/0 {URL_SAID}",
    "Q_REDIS_URL=redis://:hunter2@cache.internal:port/0": (
        f"Q_REDIS_URL must be a URL like redis://host:6379/0 {URL_SAID}"
    ),
    "AGENTMAIL_BASE_URL=api.agentmail.to": (
        f"AGENTMAIL_BASE_URL must be a URL like https://api.agentmail.to {URL_SAID}"
    ),
    "AGENTMAIL_BASE_URL=http://api.agentmail.to": (
        "AGENTMAIL_BASE_URL must be an https:// URL when COUNTERSIGN_ENV=production"
    ),
    "PUBLIC_BASE_URL=countersign.example.com": (
        f"PUBLIC_BASE_URL must be a URL like https://countersign.example.com {URL_SAID}"
    ),
    "PUBLIC_BASE_URL=http://hunter2@countersign.example.com": (
        "PUBLIC_BASE_URL must be an https:// URL when COUNTERSIGN_ENV=production"
    ),
    # Found by probe 4 (the operator): a user name and password in the address started, and
    # every invitation link and the webhook address registered at AgentMail carried them.
    "PUBLIC_BASE_URL=https://cs:hunter2@countersign.example.com": (
        "PUBLIC_BASE_URL must hold no user name or password: invitation links and the webhook "
        f"address are built from it {URL_SAID}"
    ),
    "PUBLIC_BASE_URL=https://hunter2@countersign.example.com": (
        "PUBLIC_BASE_URL must hold no user name or password: invitation links and the webhook "
        f"address are built from it {URL_SAID}"
    ),
}


def test_a_url_that_cannot_work_stops_the_start_naming_it_and_never_showing_it():
    errors = settings_errors(BAD_URLS)

    assert last_lines(errors) == refusals(BAD_URLS)
    assert [case for case, stderr in errors.items() if "hunter2" in stderr] == []


# Found by an outside probe: these started in production and only `check --deploy` said so. A weak
# key lets anyone who guesses it sign sessions, password-reset and invitation links; "*" takes any
# Host header (links built from it can point elsewhere); an origin without a scheme matches nothing,
# so every form posted through the proxy failed its CSRF check.
STRONG = "s" * 20 + "-another-strong-production-secret-0123456789abcdefghij"
ORIGIN_SAID = (
    "must be an origin like https://countersign.example.com (a scheme and a host, a port if "
    "any, in lower case, with no path): Django compares it with the browser's Origin header "
    "exactly"
)
WEAK_DEPLOYMENT = {
    "SECRET_KEY=hunter2-too-short": (
        "SECRET_KEY must be at least 50 characters long, got 17 (its value is not shown)"
    ),
    "SECRET_KEY=" + "hunt" * 15: (
        "SECRET_KEY must hold at least 5 different characters, got 4 (its value is not shown)"
    ),
    "SECRET_KEY=django-insecure-hunter2-" + "0123456789" * 5: (
        "SECRET_KEY must not start with 'django-insecure-', Django's mark of a key made for "
        "development (its value is not shown)"
    ),
    f"SECRET_KEY_FALLBACKS={STRONG},hunter2": (
        "SECRET_KEY_FALLBACKS entry 2 must be at least 50 characters long, got 7 (its value is "
        "not shown)"
    ),
    "METRICS_TOKEN=hunter2-scrape": (
        "METRICS_TOKEN must be at least 32 characters long, got 14 (its value is not shown)"
    ),
    "METRICS_TOKEN=hunter2-" + "ü" * 30: (
        "METRICS_TOKEN must be visible ASCII characters with no space or line break: a request "
        "could never carry it (its value is not shown)"
    ),
    "ALLOWED_HOSTS=countersign.example.com,*": (
        "ALLOWED_HOSTS must name the hosts served, not '*': any Host header would be taken, and "
        "links built from it could point elsewhere"
    ),
    "CSRF_TRUSTED_ORIGINS=https://countersign.example.com,countersign.example.com": (
        "CSRF_TRUSTED_ORIGINS entry 'countersign.example.com' " + ORIGIN_SAID
    ),
}


def test_a_weak_key_a_wildcard_host_or_an_origin_without_scheme_stops_the_start():
    errors = settings_errors(WEAK_DEPLOYMENT)

    assert last_lines(errors) == refusals(WEAK_DEPLOYMENT)
    assert [case for case, stderr in errors.items() if "hunter" in stderr] == []


# Found by probe 4 (the operator): the domain of new inboxes was taken as typed. Each mailbox's
# address was built from it and sent to AgentMail, and stored so: a quoting slip's space, an "@",
# a URL or capitals gave addresses no recipient or command lookup (which compare the lower-cased
# form, common.addresses) could match, and the start said nothing.
INBOX_DOMAIN_SAID = (
    "AGENTMAIL_INBOX_DOMAIN must be a domain name like agentmail.to: lower-case letters, digits, "
    "dashes and dots (an international name in its xn-- form), with no scheme, port, path or "
    "space, got "
)
BAD_DOMAINS = {
    "AGENTMAIL_INBOX_DOMAIN=@mail.example.com": INBOX_DOMAIN_SAID + "'@mail.example.com'",
    "AGENTMAIL_INBOX_DOMAIN=https://mail.example.com": (
        INBOX_DOMAIN_SAID + "'https://mail.example.com'"
    ),
    "AGENTMAIL_INBOX_DOMAIN=Mail.Example.com": INBOX_DOMAIN_SAID + "'Mail.Example.com'",
    "AGENTMAIL_INBOX_DOMAIN=b\u00fccher.example": INBOX_DOMAIN_SAID + "'b\u00fccher.example'",
    "AGENTMAIL_INBOX_DOMAIN=mail..example.com": INBOX_DOMAIN_SAID + "'mail..example.com'",
    "AGENTMAIL_INBOX_DOMAIN=-mail.example.com": INBOX_DOMAIN_SAID + "'-mail.example.com'",
}


def test_an_inbox_domain_that_is_no_domain_name_stops_the_start_naming_it():
    errors = settings_errors(BAD_DOMAINS)
    spaced = refusal_printed({"AGENTMAIL_INBOX_DOMAIN": "mail.example.com "})

    assert last_lines(errors) == refusals(BAD_DOMAINS)
    assert spaced.strip().splitlines()[-1] == (
        "config.env.SettingsError: " + INBOX_DOMAIN_SAID + "'mail.example.com '"
    )


def test_an_inbox_domain_of_a_name_or_an_xn_label_starts():
    cases = [
        "AGENTMAIL_INBOX_DOMAIN=mail.example-1.com",
        "AGENTMAIL_INBOX_DOMAIN=xn--bcher-kva.test",
    ]
    assert settings_errors(cases) == dict.fromkeys(cases, "")


# Found by probe 4 (the operator): the passkeys' relying party ID was taken as typed. A URL or a
# port, as an operator copies the site's address, started without a word; then every browser
# refused each passkey registration and sign-in (an RP ID is a bare host name, WebAuthn 5.1.3),
# the page saying only that the passkey could not be made.
RP_ID_SAID = (
    "WEBAUTHN_RP_ID must be a domain name like countersign.example.com: lower-case letters, "
    "digits, dashes and dots (an international name in its xn-- form), with no scheme, port, "
    "path or space, got "
)
BAD_RP_IDS = {
    "WEBAUTHN_RP_ID=https://countersign.example.com": (
        RP_ID_SAID + "'https://countersign.example.com'"
    ),
    "WEBAUTHN_RP_ID=countersign.example.com:443": RP_ID_SAID + "'countersign.example.com:443'",
    "WEBAUTHN_RP_ID=countersign.example.com/": RP_ID_SAID + "'countersign.example.com/'",
}


def test_a_passkey_relying_party_that_is_no_host_name_stops_the_start_naming_it():
    assert last_lines(settings_errors(BAD_RP_IDS)) == refusals(BAD_RP_IDS)


def test_a_passkey_relying_party_of_a_host_name_starts():
    case = "WEBAUTHN_RP_ID=countersign.example.com"
    assert settings_errors([case]) == {case: ""}


# Found by probe 4 (the operator): an ALLOWED_HOSTS entry is compared with the Host header's
# name alone, so one written as a URL, with a port or a path (as an operator copies the site's
# address) matched no request: the process started and answered every page, the probes and the
# webhooks included, with 400 Bad Request.
HOSTS_SAID = (
    "must be a host name (.example.com for its subdomains too) or an IP address (IPv6 in "
    "brackets), with no scheme, port, path or space: Django compares it with the request's host "
    "name alone"
)
BAD_HOSTS = {
    "ALLOWED_HOSTS=https://countersign.example.com": (
        f"ALLOWED_HOSTS entry 'https://countersign.example.com' {HOSTS_SAID}"
    ),
    "ALLOWED_HOSTS=countersign.example.com,countersign.example.com:443": (
        f"ALLOWED_HOSTS entry 'countersign.example.com:443' {HOSTS_SAID}"
    ),
    "ALLOWED_HOSTS=countersign.example.com/": (
        f"ALLOWED_HOSTS entry 'countersign.example.com/' {HOSTS_SAID}"
    ),
}


def test_an_allowed_host_that_no_request_could_match_stops_the_start_naming_it():
    assert last_lines(settings_errors(BAD_HOSTS)) == refusals(BAD_HOSTS)


def test_allowed_hosts_of_names_subdomains_and_addresses_start():
    case = "ALLOWED_HOSTS=Countersign.example.com,.example.org,10.0.0.7,[2001:db8::1]"
    assert settings_errors([case]) == {case: ""}


# Found by probe 4 (the operator): an origin is compared with the browser's Origin header as
# written (scheme://host[:port], lower case), so an entry copied from the address bar with its
# trailing slash or a path, or typed in capitals, passed the check above and matched nothing:
# behind a proxy that needs it, every form posted was refused (403, "Origin checking failed").
BAD_ORIGINS = {
    f"CSRF_TRUSTED_ORIGINS={origin}": f"CSRF_TRUSTED_ORIGINS entry {origin!r} {ORIGIN_SAID}"
    for origin in [
        "https://countersign.example.com/",
        "https://countersign.example.com/ops/admin",
        "https://Countersign.example.com",
        "https://countersign.example.com?x=1",
    ]
}


def test_a_trusted_origin_no_browser_could_send_stops_the_start_naming_it():
    assert last_lines(settings_errors(BAD_ORIGINS)) == refusals(BAD_ORIGINS)


# Found by probe 4 (the operator): a browser leaves the scheme's default port out of its Origin
# header (RFC 6454 4), so an entry naming it matched no request, as above.
DEFAULT_PORT_ORIGINS = {
    f"CSRF_TRUSTED_ORIGINS={origin}": (
        f"CSRF_TRUSTED_ORIGINS entry {origin!r} names {port}, the default port of {scheme}, "
        "which a browser never sends in its Origin header: write it without the port"
    )
    for origin, scheme, port in [
        ("https://countersign.example.com:443", "https", 443),
        ("http://countersign.example.com:80", "http", 80),
        ("https://*.example.org:443", "https", 443),
    ]
}


def test_a_trusted_origin_with_its_schemes_default_port_stops_the_start_naming_it():
    assert last_lines(settings_errors(DEFAULT_PORT_ORIGINS)) == refusals(DEFAULT_PORT_ORIGINS)


def test_trusted_origins_with_a_port_or_for_subdomains_start():
    case = "CSRF_TRUSTED_ORIGINS=https://countersign.example.com:8443,https://*.example.org"
    assert settings_errors([case]) == {case: ""}


def test_a_strong_key_and_its_fallback_start_in_production():
    case = f"SECRET_KEY={STRONG} SECRET_KEY_FALLBACKS={STRONG[::-1]}"
    assert settings_errors([case]) == {case: ""}


@pytest.mark.parametrize(
    "url", ["postgres://cs:hunter2-secret@db.internal:port/cs", "hunter2-secret@db.internal/cs"]
)
def test_a_malformed_database_url_is_named_and_its_password_never_shown(url):
    """It ended in dj_database_url's ParseError or UnknownSchemeError, naming no variable."""
    result = run_manage("check", env={**PRODUCTION_ENV, "DATABASE_URL": url})
    assert result.returncode != 0
    assert result.stderr.splitlines()[-1].startswith("DATABASE_URL must be a URL like postgres://")
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
        "config.env.SettingsError: SECRET_ENCRYPTION_KEYS: key id 'k1' appears twice"
    )
    assert "AAAA" not in result.stderr


BLOB_STORE_SAID = (
    "ATTACHMENT_BLOB_STORE must be the dotted path of a class with put and read, like "
    "intents.blobs.DatabaseBlobStore, got "
)


@pytest.mark.parametrize("entry", ["config.wsgi", "config.asgi"])
def test_a_web_process_refuses_to_start_with_a_blob_store_it_cannot_use(entry):
    """Found by probe 4 (the operator): the store was imported at the first attachment, so a
    process with a misspelt ATTACHMENT_BLOB_STORE started, and every draft with an attachment,
    from the API or a reviewer's edit, and every send of one, was a 500 (ImportError)."""
    store = "intents.blobs.DatabaseBlobStor"
    env = {**PRODUCTION_ENV, "DATABASE_URL": settings.DATABASE_URL, "ATTACHMENT_BLOB_STORE": store}
    result = run_python("-c", f"import {entry}", env=env)
    assert result.returncode != 0
    assert result.stderr.splitlines()[-1] == (
        f"config.env.SettingsError: {BLOB_STORE_SAID}'intents.blobs.DatabaseBlobStor'"
    )


@pytest.fixture
def blob_store_resolved_again():
    """blob_store_class resolves the setting once a process; here, at each call, then as before."""
    from intents.blobs import blob_store_class

    blob_store_class.cache_clear()
    yield blob_store_class
    blob_store_class.cache_clear()


@pytest.mark.parametrize(
    "store",
    [
        # A typo in the class, in the module, and no dotted path at all.
        "intents.blobs.DatabaseBlobStor",
        "intents.blob.DatabaseBlobStore",
        "DatabaseBlobStore",
        # Importable, but no store: it failed at the first file's put.
        "intents.blobs.BlobPurged",
    ],
)
def test_a_blob_store_that_cannot_be_used_is_refused_naming_it(
    settings, blob_store_resolved_again, store
):
    """What the web processes above run as they start (the intents app's ready), for each way
    of getting the store wrong."""
    from config.env import SettingsError

    settings.ATTACHMENT_BLOB_STORE = store
    with pytest.raises(SettingsError) as refused:
        blob_store_resolved_again()

    assert str(refused.value) == f"{BLOB_STORE_SAID}{store!r}"


KEY = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="


@pytest.mark.parametrize(
    ("ring", "said"),
    [
        # Written backwards, key then id: the key was quoted as the id of a key not in base64.
        (
            [f"{KEY}:k1"],
            "SECRET_ENCRYPTION_KEYS: entry 1 is not valid base64 after its key id (the id is "
            "not shown: it may be a key written first)",
        ),
        (
            ["k1:" + "A" * 43 + "=", KEY.rstrip("=") + ":key2"],
            "SECRET_ENCRYPTION_KEYS: entry 2 must be 32 bytes after its key id, got 3 (the id "
            "is not shown: it may be a key written first)",
        ),
        # A plain id is still named.
        (["k1:" + KEY[:20]], "SECRET_ENCRYPTION_KEYS: key 'k1' must be 32 bytes, got 15"),
        # A character that is not ASCII (a pasted typographic quote, a byte that is not UTF-8):
        # base64's ValueError, which named no setting, stopped every process.
        (["k1:" + KEY[:-1] + "\u201d"], "SECRET_ENCRYPTION_KEYS: key 'k1' is not valid base64"),
        (["k1:" + KEY[:-1] + "\udcff"], "SECRET_ENCRYPTION_KEYS: key 'k1' is not valid base64"),
        (["garbage"], "each SECRET_ENCRYPTION_KEYS entry must be 'kid:base64key'"),
    ],
    ids=["backwards", "backwards-unpadded", "plain-id", "not-ascii", "not-utf8", "no-id"],
)
def test_a_malformed_key_ring_never_shows_a_key(settings, ring, said):
    from django.core.exceptions import ImproperlyConfigured

    from common import crypto

    settings.SECRET_ENCRYPTION_KEYS = ring
    with pytest.raises(ImproperlyConfigured) as refused:
        crypto.key_ring()

    assert str(refused.value) == said
    assert KEY[:16] not in str(refused.value)


# A bad setting stopped every command with a page of traceback (Django's settings import, ours,
# the reader's raise) whose last line was the reason: an operator had to find it under 40 lines
# of frames that say nothing about their configuration. Any one of them is enough: each is a
# refusal of the settings, not a bug.
ONE_LINE_REFUSALS = [
    (["check"], {"DEBUG": "maybe"}, "DEBUG must be a boolean (true/false), got 'maybe'"),
    (["migrate"], {"SEND_BATCH_SIZE": "0"}, "SEND_BATCH_SIZE must be at least 1 and at most"),
    (["qcluster"], {"COUNTERSIGN_ENV": "staging"}, "COUNTERSIGN_ENV must be development, test"),
    (["help", "check"], {"Q_POLL": "nan"}, "Q_POLL must be a finite number"),
    (["migrate", "--help"], {"Q_POLL": "nan"}, "Q_POLL must be a finite number"),
    # Read as the apps are set up (common.apps), not as the settings are imported.
    (
        ["check"],
        {"SECRET_ENCRYPTION_KEYS": "k1:" + "A" * 43 + "=,k1:" + "B" * 43 + "="},
        "SECRET_ENCRYPTION_KEYS: key id 'k1' appears twice",
    ),
]


@pytest.mark.parametrize(("command", "variables", "said"), ONE_LINE_REFUSALS)
def test_a_command_stopped_by_a_setting_says_only_why(command, variables, said):
    result = run_manage(*command, env={"DATABASE_URL": settings.DATABASE_URL, **variables})

    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert said in result.stderr


def test_a_production_setting_missing_is_one_line_too():
    env = {k: v for k, v in PRODUCTION_ENV.items() if k != "SECRET_KEY"}
    result = run_manage("check", env={**env, "DATABASE_URL": settings.DATABASE_URL})

    assert (result.returncode, result.stderr) == (
        1,
        "SECRET_KEY must be set when COUNTERSIGN_ENV=production\n",
    )


@pytest.mark.parametrize(
    "raised",
    [
        "RuntimeError('a real bug')",
        # Django's own refusal of a configuration is not ours to shorten: it may be a bug.
        "__import__('django.core.exceptions').core.exceptions.ImproperlyConfigured('a real bug')",
    ],
)
def test_a_command_that_fails_for_another_reason_keeps_its_traceback(raised):
    env = {"DATABASE_URL": settings.DATABASE_URL}
    result = run_manage("shell", "--no-imports", "-c", f"raise {raised}", env=env)

    assert result.returncode != 0
    assert "Traceback" in result.stderr and "a real bug" in result.stderr


def test_the_help_without_settings_is_still_djangos_list_and_its_note():
    result = run_manage("--help", env={"DATABASE_URL": settings.DATABASE_URL, "DEBUG": "maybe"})

    assert result.returncode == 0
    assert "Available subcommands:" in result.stdout
    assert "settings are not properly configured (error: DEBUG must be a boolean" in (
        result.stdout + result.stderr
    )


def test_the_help_of_a_command_is_unchanged_with_good_settings():
    result = run_manage("check", "--help", env={"DATABASE_URL": settings.DATABASE_URL})

    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith("usage: manage.py check")


# Found by an outside probe of secrets in git: the development defaults are in config/settings.py,
# so in every clone and every copy of the history. Production took them when an operator set them
# (copied from the settings, or from a development machine's environment): anyone with the source
# could then sign sessions, password-reset and invitation links, or open every sealed AgentMail
# key, webhook secret and SSO client secret of a database dump.
PUBLISHED = {
    "SECRET_KEY=dev-only-insecure-key-7c1f2a9e-never-use-in-production-4b8d0e6a5f3c": (
        "SECRET_KEY is the development key written in Countersign's source, which anyone can "
        "read: make a new one (its value is not shown)"
    ),
    f"SECRET_KEY_FALLBACKS={STRONG},dev-only-insecure-key-7c1f2a9e-never-use-in-production-"
    "4b8d0e6a5f3c": (
        "SECRET_KEY_FALLBACKS entry 2 is the development key written in Countersign's source, "
        "which anyone can read: make a new one (its value is not shown)"
    ),
    "SECRET_ENCRYPTION_KEYS=prod:ZGV2LW9ubHktZW5jcnlwdGlvbi1rZXktMzItYnl0ZXM=,k1:"
    + "A" * 43
    + "=": (
        "SECRET_ENCRYPTION_KEYS: its first entry, which seals every new secret, is the "
        "development key written in Countersign's source, which anyone can read: put a new key "
        "first and re-seal (DEPLOYMENT.md, Rotating secrets) (its value is not shown)"
    ),
}


def test_a_key_published_in_the_source_stops_the_start_in_production():
    errors = settings_errors(PUBLISHED)

    assert last_lines(errors) == refusals(PUBLISHED)
    assert [case for case, stderr in errors.items() if "ZGV2LW9ubHkt" in stderr] == []


def test_the_development_encryption_key_may_stay_after_a_new_one_to_be_resealed_away_from():
    """A deployment that sealed with it must still open its secrets while reencrypt_secrets
    seals them again under the new first key."""
    case = (
        "SECRET_ENCRYPTION_KEYS=k2:"
        + "A" * 43
        + "=,dev1:ZGV2LW9ubHktZW5jcnlwdGlvbi1rZXktMzItYnl0ZXM="
    )
    assert settings_errors([case]) == {case: ""}


@pytest.mark.parametrize("blank", [" ", "\t", "  \n"])
def test_a_required_setting_of_only_white_space_stops_the_start_naming_it(blank):
    """AGENTMAIL_ORG_API_KEY=" " (a template's placeholder, a quoting slip) was taken for a key:
    the start went through and every call to AgentMail was refused later. Blank is not set."""
    printed = refusal_printed({"AGENTMAIL_ORG_API_KEY": blank})
    assert printed.splitlines()[-1] == (
        "config.env.SettingsError: AGENTMAIL_ORG_API_KEY must be set when "
        "COUNTERSIGN_ENV=production (it holds only white space)"
    )


def test_production_delivers_to_no_private_network_unless_an_operator_says_so():
    """Agent events and single sign-on reach only public addresses in production (a tenant
    admin chooses those URLs: the server-side request forgery surface); only the operator's
    environment can open private networks, for a self-hosted receiver."""
    names = ["AGENT_EVENTS_ALLOW_PRIVATE_NETWORKS", "SSO_ALLOW_PRIVATE_NETWORKS"]
    production = production_settings({})
    opened = production_settings({"AGENT_EVENTS_ALLOW_PRIVATE_NETWORKS": "true"})

    assert [production[name] for name in names] == [False, False]
    assert [opened[name] for name in names] == [True, False]


def test_production_reaches_no_loopback_address_even_with_private_networks_allowed():
    """Loopback is the deployment host itself (its /metrics, redis, pgbouncer, PostgreSQL): a
    self-hosted deployment that opens its private networks to receivers and identity providers
    does not open it too; only EGRESS_ALLOW_LOOPBACK does."""
    private = {"AGENT_EVENTS_ALLOW_PRIVATE_NETWORKS": "true", "SSO_ALLOW_PRIVATE_NETWORKS": "true"}

    assert production_settings(private)["EGRESS_ALLOW_LOOPBACK"] is False
    assert (
        production_settings({**private, "EGRESS_ALLOW_LOOPBACK": "true"})["EGRESS_ALLOW_LOOPBACK"]
        is True
    )
