"""The deploy checks (``manage.py check --deploy``) of common/checks.py."""

from django.core.checks import run_checks

from config.env import DEVELOPMENT_ENCRYPTION_KEY

NEW_KEY = "k2:bmV3LWtleS1vZi10aGlzLWRlcGxveW1lbnQtMzItYnl0ZXM="


def test_a_key_ring_that_still_holds_the_development_key_is_warned_of(settings):
    """Production refuses the development key first in the ring but opens what it sealed with it
    behind a new first key, while reencrypt_secrets seals everything again: a ring that keeps it
    after that still opens every secret a database dump holds for anyone with the source."""
    settings.PRODUCTION = True
    settings.SECRET_ENCRYPTION_KEYS = [NEW_KEY, "old:" + DEVELOPMENT_ENCRYPTION_KEY.split(":")[1]]

    found = [m for m in run_checks(include_deployment_checks=True) if m.id == "countersign.W002"]

    assert len(found) == 1
    assert "SECRET_ENCRYPTION_KEYS" in found[0].msg and "entry 2" in found[0].msg
    assert DEVELOPMENT_ENCRYPTION_KEY.split(":")[1] not in found[0].msg + found[0].hint


def test_a_key_ring_without_it_is_not_warned_of(settings):
    settings.PRODUCTION = True
    settings.SECRET_ENCRYPTION_KEYS = [NEW_KEY]

    assert "countersign.W002" not in {m.id for m in run_checks(include_deployment_checks=True)}
