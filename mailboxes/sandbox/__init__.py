"""A faithful local fake of the AgentMail HTTP API (reference/agentmail-api.md §8).

Django-independent: it runs as its own process, ``python -m mailboxes.sandbox --port 8025 --db
PATH``, keeps its state in SQLite, and signs webhooks with ``svix``.
"""

from .server import build, main, serve

__all__ = ["build", "main", "serve"]
