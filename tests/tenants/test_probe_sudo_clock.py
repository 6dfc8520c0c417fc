"""Sudo mode's window (tenants.sudo) against a clock that stepped: a proof stamped ahead of the
clock that checks it (a web host running fast, then corrected; replicas whose clocks disagree)
held for SUDO_SECONDS plus the whole step, an hour's step an hour and a quarter. A proof from the
future is no proof: the stale session is asked to confirm it is the person."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from config.clock import db_now
from tenants.models import TotpDevice
from tenants.user_sessions import PROVEN_AT_KEY
from tests.tenants.test_sudo import enrolled_session, sent_to_confirm  # noqa: F401

pytestmark = pytest.mark.django_db


def _stamp(client, when) -> None:
    session = client.session
    session[PROVEN_AT_KEY] = when.isoformat()
    session.save()


def test_a_proof_stamped_ahead_of_the_clock_does_not_open_sudo_mode(enrolled_session):  # noqa: F811
    user, client, _secret = enrolled_session
    _stamp(client, timezone.now() + timedelta(hours=1))

    refused = client.post(reverse("two_factor_remove"))

    sent_to_confirm(refused, reverse("account_security"))
    assert TotpDevice.objects.filter(user=user, confirmed=True).exists()


def test_a_proof_just_made_still_opens_it(enrolled_session):  # noqa: F811
    user, client, _secret = enrolled_session
    _stamp(client, db_now())  # the clock the check reads (a database host's may lag this one)

    assert client.post(reverse("two_factor_remove")).status_code == 302
    assert not TotpDevice.objects.filter(user=user).exists()
