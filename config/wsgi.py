"""The WSGI application: the provider's webhooks through ``config.machine`` (a short middleware
chain), every other path through Django's handler and the full ``MIDDLEWARE``."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_application = get_wsgi_application()

# Imported once Django is set up (get_wsgi_application ran django.setup()).
from config.machine import MachineHandler, is_machine  # noqa: E402

machine_application = MachineHandler()


def application(environ, start_response):
    if is_machine(environ.get("PATH_INFO", "")):
        return machine_application(environ, start_response)
    return django_application(environ, start_response)
