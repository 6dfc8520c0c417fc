"""Per request: the signed-in user's language and time zone (tenants.preferences).

Runs after Django's LocaleMiddleware, which has already activated the browser's language (the
answer for signed-out pages and for users who chose none), and after AuthenticationMiddleware.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils import timezone, translation

from tenants.preferences import language_codes, zone_for


class UserPreferencesMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = request.user
        zone = None
        if user.is_authenticated:
            if user.language in language_codes():
                translation.activate(user.language)
                request.LANGUAGE_CODE = user.language
            zone = zone_for(user)
        if zone is None:
            timezone.deactivate()
        else:
            timezone.activate(zone)
        try:
            return self.get_response(request)
        finally:
            # The thread serves other people next: never leave one person's zone behind.
            timezone.deactivate()
