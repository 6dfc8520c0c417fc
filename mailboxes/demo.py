"""Demo mailboxes in the AgentMail sandbox (filled in with provisioning)."""


def seed_mailboxes(*, stdout) -> None:
    stdout.write("demo mailboxes: provisioning not built yet")
