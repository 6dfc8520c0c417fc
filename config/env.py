"""Reading settings from the environment: each reader names the variable in its refusal
(``SettingsError``) and never shows a value that may be a secret. ``config.settings`` is the
one caller; what each variable means is said there and in README's configuration table.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
from typing import overload
from urllib.parse import urlsplit

from django.core.checks.security.base import (
    SECRET_KEY_INSECURE_PREFIX,
    SECRET_KEY_MIN_LENGTH,
    SECRET_KEY_MIN_UNIQUE_CHARACTERS,
)
from django.core.exceptions import ImproperlyConfigured


class SettingsError(ImproperlyConfigured):
    """A setting refused by our own settings code (this module, ``config.settings``, the key ring
    in ``common.crypto``): its message is the whole story, one line naming the variable, so
    ``manage.py`` prints only that and exits 1. An ImproperlyConfigured raised anywhere else (by
    Django, or by our code about itself) may be a bug and keeps its traceback."""


# The development defaults, written in config.settings and so in every clone and every copy of
# the history: production refuses them (strong_key, published_sealing_key) whoever set them.
DEVELOPMENT_SECRET_KEY = "dev-only-insecure-key-7c1f2a9e-never-use-in-production-4b8d0e6a5f3c"
DEVELOPMENT_ENCRYPTION_KEY = "dev1:ZGV2LW9ubHktZW5jcnlwdGlvbi1rZXktMzItYnl0ZXM="
_PUBLISHED = "the development key written in Countersign's source, which anyone can read"


@overload
def env(name: str, default: str) -> str: ...
@overload
def env(name: str, default: None = None) -> str | None: ...
def env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return value if value not in (None, "") else default


def env_bool(name: str, default: bool) -> bool:
    value = env(name)
    if value is None:
        return default
    if value.lower() in {"1", "true", "yes", "on"}:
        return True
    if value.lower() in {"0", "false", "no", "off"}:
        return False
    raise SettingsError(f"{name} must be a boolean (true/false), got {value!r}")


# The most any number here may be when its variable names no bound of its own: 31 years in
# seconds. Past it figures start and then fail where they are used: a sign-in of 10^20 s made
# every sign-in a 500 (the session's expiry date overflowed), a timeout past what a socket takes
# failed every AgentMail call, 10^20 minutes of cool-off stopped the start naming no variable.
MOST = 10**9
WHOLE = re.compile(r"\s*[-+]?[0-9]+\s*")


def _env_number(name: str, default, kind: type, noun: str, low, high):
    """The variable read as ``kind`` (int or float), finite and within ``low``..``high`` (each
    optional, inclusive; at most ``MOST`` when ``high`` is None), or ImproperlyConfigured naming
    it; ``default`` when it is unset."""
    raw = env(name)
    most = MOST if high is None else high
    if raw is None:
        number = default
    else:
        try:
            number = kind(raw)
        except ValueError:
            number = None
        if WHOLE.fullmatch(raw) and (number is None or not math.isfinite(number)):
            # Thousands of digits: int() reads at most 4,300, float() makes them infinite. Not
            # echoed whole.
            negative = raw.strip()[0] == "-"
            bound = f"at least {-most if low is None else low}" if negative else f"at most {most}"
            digits = len(raw.strip().lstrip("+-"))
            raise SettingsError(f"{name} must be {bound}, got a number of {digits} digits")
        if number is None:
            raise SettingsError(f"{name} must be {noun}, got {raw!r}")
        if not math.isfinite(number):
            raise SettingsError(f"{name} must be a finite number, got {raw!r}")
    if (low is not None and number < low) or (high is not None and number > high):
        bounds = [f"at least {low}"] * (low is not None) + [f"at most {high}"] * (high is not None)
        raise SettingsError(f"{name} must be {' and '.join(bounds)}, got {number!r}")
    if number > most:
        raise SettingsError(f"{name} must be at most {most}, got {number!r}")
    return number


def env_int(name: str, default: int, *, low: int | None = None, high: int | None = None) -> int:
    return _env_number(name, default, int, "an integer", low, high)


def env_float(
    name: str, default: float, *, low: float | None = None, high: float | None = None
) -> float:
    return _env_number(name, default, float, "a number", low, high)


def env_list(name: str, default: list[str]) -> list[str]:
    value = env(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def _production() -> bool:
    """``COUNTERSIGN_ENV=production`` (config.settings refuses any value but the three)."""
    return env("COUNTERSIGN_ENV") == "production"


def required(name: str, dev_default: str) -> str:
    """The variable's value; unset, empty or only white space (a template's placeholder, a
    quoting slip) is not set: refused in production, the development default elsewhere."""
    value = env(name)
    if value is None or not value.strip():
        if _production():
            blank = "" if value is None else " (it holds only white space)"
            raise SettingsError(f"{name} must be set when COUNTERSIGN_ENV=production{blank}")
        return dev_default
    return value


def url_checked(
    name: str, value: str, *, like: str, schemes: set[str], built_from: str = ""
) -> str:
    """``value`` (the variable ``name``) when it is a URL of one of ``schemes`` with a host (or,
    for ``unix``, a path) and a port that is a number; else ImproperlyConfigured naming the
    variable but not the value, which may hold a password. ``https`` in production when
    ``schemes`` allows it: these carry API keys, invitation links and customer mail.
    ``built_from``: what is built from the URL and handed to others (links, an address given to
    AgentMail); such a URL may hold no user name or password, which would go out with them."""
    try:
        parts = urlsplit(value)
        usable = parts.scheme in schemes and bool(
            parts.path if parts.scheme == "unix" else parts.hostname
        )
        parts.port  # noqa: B018 (a port that is no number or past 65535 raises ValueError)
    except ValueError:
        usable = False
    if not usable:
        raise SettingsError(
            f"{name} must be a URL like {like} (its value is not shown: it may hold a password)"
        )
    if _production() and "https" in schemes and parts.scheme != "https":
        raise SettingsError(f"{name} must be an https:// URL when COUNTERSIGN_ENV=production")
    if built_from and "@" in parts.netloc:
        raise SettingsError(
            f"{name} must hold no user name or password: {built_from} are built from it (its "
            "value is not shown: it may hold a password)"
        )
    return value


# A host name as DNS writes it: labels of lower-case letters, digits and inner dashes, 1 to 63
# characters, joined by single dots, 253 characters at most; an IDN in its A-label (xn--) form.
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
HOST_NAME = re.compile(rf"(?=.{{1,253}}\Z){_LABEL}(?:\.{_LABEL})*")


def host_name(name: str, value: str, *, like: str) -> str:
    """``value`` (the variable ``name``) when it is a host name in the form DNS and every
    comparison of ours use (lower case, an IDN as xn--), else SettingsError quoting it: a domain
    is no secret. A scheme, a port, a path, an "@", capitals or a stray space are refused rather
    than mended, so what runs is what the operator wrote."""
    if HOST_NAME.fullmatch(value):
        return value
    raise SettingsError(
        f"{name} must be a domain name like {like}: lower-case letters, digits, dashes and dots "
        f"(an international name in its xn-- form), with no scheme, port, path or space, "
        f"got {value!r}"
    )


def allowed_hosts_checked(name: str, hosts: list[str]) -> list[str]:
    """``hosts`` when each entry could match a request: Django compares an entry with the Host
    header's name alone (lower-cased, its port cut off, an IPv6 address kept in its brackets), so
    an entry written as a URL, with a port or a path matched nothing, and every request, the
    probes included, was a 400. "*" is left to the production rule; host names are no secret."""
    for host in hosts:
        bare = host.lower().removeprefix(".")
        if host == "*" or HOST_NAME.fullmatch(bare) or _bracketed_ipv6(bare):
            continue
        raise SettingsError(
            f"{name} entry {host!r} must be a host name (.example.com for its subdomains too) or "
            "an IP address (IPv6 in brackets), with no scheme, port, path or space: Django "
            "compares it with the request's host name alone"
        )
    return hosts


def _bracketed_ipv6(host: str) -> bool:
    if not (host.startswith("[") and host.endswith("]")):
        return False
    try:
        ipaddress.IPv6Address(host[1:-1])
    except ValueError:
        return False
    return True


def strong_key(name: str, value: str) -> str:
    """``value`` (the key ``name``) when it passes the rule of Django's deploy check (W009,
    W025), else ImproperlyConfigured saying which part failed, never the key. In production only:
    gunicorn runs no system checks, so a weak key served until someone ran ``check --deploy``,
    and whoever guesses it signs sessions, password-reset and invitation links."""
    if not _production():
        return value
    hidden = "(its value is not shown)"
    if len(value) < SECRET_KEY_MIN_LENGTH:
        raise SettingsError(
            f"{name} must be at least {SECRET_KEY_MIN_LENGTH} characters long, "
            f"got {len(value)} {hidden}"
        )
    if len(set(value)) < SECRET_KEY_MIN_UNIQUE_CHARACTERS:
        raise SettingsError(
            f"{name} must hold at least {SECRET_KEY_MIN_UNIQUE_CHARACTERS} different characters, "
            f"got {len(set(value))} {hidden}"
        )
    if value == DEVELOPMENT_SECRET_KEY:
        raise SettingsError(f"{name} is {_PUBLISHED}: make a new one {hidden}")
    if value.startswith(SECRET_KEY_INSECURE_PREFIX):
        raise SettingsError(
            f"{name} must not start with {SECRET_KEY_INSECURE_PREFIX!r}, Django's mark of a key "
            f"made for development {hidden}"
        )
    return value


def unpublished_sealing_key(name: str, entries: list[str]) -> list[str]:
    """``entries`` (the key ring ``name``) unless, in production, its first entry, which seals
    every new secret, holds the development key (under any id). A later entry may: a deployment
    that sealed with it opens its secrets with it while ``reencrypt_secrets`` seals them again
    under a new first key."""
    if _production() and entries:
        material = entries[0].partition(":")[2].strip()
        if material == DEVELOPMENT_ENCRYPTION_KEY.partition(":")[2]:
            raise SettingsError(
                f"{name}: its first entry, which seals every new secret, is {_PUBLISHED}: put a "
                "new key first and re-seal (DEPLOYMENT.md, Rotating secrets) (its value is not "
                "shown)"
            )
    return entries


# A bearer token a scraper sends: long enough not to be guessed in production.
BEARER_TOKEN_MIN_LENGTH = 32


def bearer_token(name: str, value: str) -> str:
    """``value`` (the bearer token ``name``; "" leaves its endpoint off) when it could ever match:
    visible ASCII with no space. The header arrives decoded as Latin-1 and compared with the
    token's UTF-8 bytes, and a scraper trims its credentials file, so a token with a non-ASCII
    letter or an edge space or newline was refused on every scrape while the endpoint looked
    configured. In production also at least BEARER_TOKEN_MIN_LENGTH characters. Never shown."""
    if not value:
        return value
    hidden = "(its value is not shown)"
    if not all("!" <= character <= "~" for character in value):
        raise SettingsError(
            f"{name} must be visible ASCII characters with no space or line break: a request "
            f"could never carry it {hidden}"
        )
    if _production() and len(value) < BEARER_TOKEN_MIN_LENGTH:
        raise SettingsError(
            f"{name} must be at least {BEARER_TOKEN_MIN_LENGTH} characters long, got "
            f"{len(value)} {hidden}"
        )
    return value


def origins_checked(name: str, origins: list[str]) -> list[str]:
    """``origins`` when each is one a browser could send: a scheme and a host (a port if any, not
    the scheme's default), in lower case, and nothing else. Django compares an entry without "*" with the Origin header
    exactly: without a scheme (its 4_0.E001, which only ``check`` says, and gunicorn runs none),
    with a trailing slash or a path copied from the address bar, or in capitals, an entry matched
    no request, and every form posted through a proxy that needs it failed its CSRF check.
    Origins are no secret: the bad one is named."""
    for origin in origins:
        try:
            parts = urlsplit(origin)
            parts.port  # noqa: B018 (a port that is no number or past 65535 raises ValueError)
            usable = (
                parts.scheme in {"http", "https"}
                and bool(parts.hostname)
                and "@" not in parts.netloc
                and origin == f"{parts.scheme}://{parts.netloc}".lower()
            )
        except ValueError:
            usable = False
        if not usable:
            raise SettingsError(
                f"{name} entry {origin!r} must be an origin like "
                "https://countersign.example.com (a scheme and a host, a port if any, in lower "
                "case, with no path): Django compares it with the browser's Origin header exactly"
            )
        if parts.port == _DEFAULT_PORTS[parts.scheme]:
            raise SettingsError(
                f"{name} entry {origin!r} names {parts.port}, the default port of "
                f"{parts.scheme}, which a browser never sends in its Origin header: write it "
                "without the port"
            )
    return origins


# A browser leaves these out of the Origin header it sends (RFC 6454 4: the default port of the
# scheme is not serialised), so an entry naming one matches no request.
_DEFAULT_PORTS = {"http": 80, "https": 443}
