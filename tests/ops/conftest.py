"""The ops tests drive real sends through the sandbox with the intents tests' fixtures, build
history rows with the webhook tests' ones, and call the agent API with its tests' tokens."""

from tests.agent_api.conftest import make_token  # noqa: F401 (fixtures, used by name)
from tests.intents.conftest import fast_send, live  # noqa: F401
from tests.webhooks.conftest import hook_for, intent_row, mailbox_row  # noqa: F401
