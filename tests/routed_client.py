"""The test client, routed as ``config.wsgi`` routes a real request: machine paths (the provider's
webhooks) through ``MACHINE_MIDDLEWARE``, every other path through ``MIDDLEWARE``. Django's own
client always runs ``MIDDLEWARE``, so a webhook view that came to depend on the browser's
middleware (a session, the language, the user) would pass its tests and fail in production."""

from __future__ import annotations

from django.test import Client
from django.test.client import ClientHandler

from config.machine import MachineMiddlewareMixin, is_machine


class _MachineClientHandler(MachineMiddlewareMixin, ClientHandler):
    pass


class _RoutedHandler:
    def __init__(self, enforce_csrf_checks: bool):
        self.pages = ClientHandler(enforce_csrf_checks)
        self.machine = _MachineClientHandler(enforce_csrf_checks)

    def __call__(self, environ):
        handler = self.machine if is_machine(environ.get("PATH_INFO", "")) else self.pages
        return handler(environ)


class RoutedClient(Client):
    def __init__(self, enforce_csrf_checks: bool = False, **defaults):
        super().__init__(enforce_csrf_checks, **defaults)
        self.handler = _RoutedHandler(enforce_csrf_checks)
