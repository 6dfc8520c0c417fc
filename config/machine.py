"""The WSGI handler for machine requests: the provider's webhooks, which a signature
authenticates, reach their view through ``settings.MACHINE_MIDDLEWARE`` only.

Everything in ``settings.MIDDLEWARE`` after the security middleware serves people in browsers
(session, language, CSRF, user, time zone, messages, htmx, lockout, the sign-in gate) and does
nothing for a signed JSON delivery but cost: about 0.3 ms of CPU per event, a third of the
receiver's own Python (BENCHMARKS.md). ``config.wsgi`` sends paths under
``settings.MACHINE_PATH_PREFIXES`` here and every other path to Django's usual handler.

Django's handler registers a middleware's ``process_view``, ``process_exception`` and
``process_template_response`` hooks; this one has no place for them, so listing such a
middleware is refused at start-up rather than silently skipped.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.handlers.exception import convert_exception_to_response
from django.core.handlers.wsgi import WSGIHandler
from django.utils.module_loading import import_string

HOOKS = ("process_view", "process_exception", "process_template_response")


class MachineMiddlewareMixin:
    """A Django handler (``BaseHandler`` subclass) whose chain is ``MACHINE_MIDDLEWARE``."""

    def load_middleware(self, is_async=False):
        if is_async:
            raise ImproperlyConfigured("The machine handler is synchronous (WSGI).")
        self._view_middleware = []
        self._template_response_middleware = []
        self._exception_middleware = []
        handler = convert_exception_to_response(self._get_response)
        for path in reversed(settings.MACHINE_MIDDLEWARE):
            middleware = import_string(path)
            hooks = [hook for hook in HOOKS if hasattr(middleware, hook)]
            if hooks:
                raise ImproperlyConfigured(
                    f"MACHINE_MIDDLEWARE: {path} has {', '.join(hooks)}, which only the full "
                    "handler runs; serve those paths through MIDDLEWARE instead."
                )
            handler = convert_exception_to_response(middleware(handler))
        self._middleware_chain = handler


class MachineHandler(MachineMiddlewareMixin, WSGIHandler):
    """What ``config.wsgi`` serves machine paths with."""


class AllowedHostsMiddleware:
    """Refuse a Host outside ``ALLOWED_HOSTS`` (400), as the full chain does: there Django checks it
    when CommonMiddleware reads ``request.get_host()``, which nothing on the short chain would."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.get_host()  # raises DisallowedHost, which the handler answers with 400
        return self.get_response(request)


def is_machine(path_info: str) -> bool:
    return path_info.startswith(tuple(settings.MACHINE_PATH_PREFIXES))
