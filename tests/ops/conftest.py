"""The ops tests drive real sends through the sandbox with the intents tests' fixtures, and build
history rows with the webhook tests' ones."""

from tests.intents.conftest import fast_send, live  # noqa: F401 (fixtures, used by name)
from tests.webhooks.conftest import hook_for, intent_row, mailbox_row  # noqa: F401 (fixtures)
