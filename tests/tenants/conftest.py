"""Fixtures of the operators' admin tests."""

import pytest
from django.test import Client

from tenants.models import User


@pytest.fixture
def operator():
    """A test client signed in as a superuser of the operators' admin."""
    user = User.objects.create_superuser("ops@countersign.test", "operator-pass-1")
    client = Client()
    client.force_login(user)
    return client
