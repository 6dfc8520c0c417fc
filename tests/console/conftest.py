"""The console pages use the same fixtures as the other staff pages: local mailbox rows, an admin
of tenant A, drafts and intents written through the real services (defined in tests/ui)."""

from tests.ui.conftest import admin_a, mailbox_a, mailbox_b, make_draft, make_intent  # noqa: F401
