"""The WSGI application: the provider's webhooks through ``config.machine`` (a short middleware
chain), every other path through Django's handler and the full ``MIDDLEWARE``."""

import os

import django
from django.core.handlers.wsgi import WSGIHandler

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# What django.core.wsgi.get_wsgi_application does before it builds its handler.
django.setup(set_prefix=False)

# Imported once Django is set up.
from config.machine import MachineHandler, is_machine  # noqa: E402


class RoutingHandler(WSGIHandler):
    """Django's WSGI handler (the full chain), which hands machine paths to a ``MachineHandler``."""

    def __init__(self):
        super().__init__()
        self.machine = MachineHandler()

    def __call__(self, environ, start_response):
        if is_machine(environ.get("PATH_INFO", "")):
            return self.machine(environ, start_response)
        return super().__call__(environ, start_response)


application = RoutingHandler()
