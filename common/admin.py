"""What the operators' admin shares across apps: a guard on URL lookups, and the schedules of the
background work, its task results and queue, and the sign-in throttle's rows made read-only."""

from axes.admin import AccessAttemptAdmin, AccessFailureLogAdmin, AccessLogAdmin
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib import admin
from django.db.models.constants import LOOKUP_SEP
from django_q.admin import FailAdmin, QueueAdmin, ScheduleAdmin, TaskAdmin
from django_q.models import Failure, OrmQ, Schedule, Success


class UnfilterableFieldsAdmin(admin.ModelAdmin):
    """Refuses URL lookups (``?digest__startswith=0a``) on the fields in ``unfilterable``.

    Django allows a lookup on any local field, listed or not, and the count of results answers it:
    a field left off every page could still be read a character at a time, and customer mail
    could be searched in full. A refused lookup is a 400 (``DisallowedModelAdminLookup``)."""

    unfilterable: frozenset[str] = frozenset()

    def lookup_allowed(self, lookup, value, request):
        if lookup.split(LOOKUP_SEP, 1)[0] in self.unfilterable:
            return False
        return super().lookup_allowed(lookup, value, request)


class ReadOnlyAdmin:
    """Mixin for an admin (or inline) whose rows the services alone write: nothing is added,
    changed or deleted here, so nothing skips a service's checks and its audit row."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


admin.site.unregister(Schedule)


@admin.register(Schedule)
class ReadOnlyScheduleAdmin(ReadOnlyAdmin, ScheduleAdmin):
    """The sweep, the webhook backfill, retention and the display-name sync are created by
    migrations and nothing creates them again: a schedule deleted here stopped the sweep for good
    (and with it retries, reconciliation and expiry), and one added or pointed elsewhere here ran
    any importable function in the workers, past every service and its audit row."""


class ReadOnlyLibraryAdmin(ReadOnlyAdmin):
    """A library's admin shown, not used: no action either ("Resubmit", "Clean up expired"), as
    those check no permission of their own."""

    actions = None


# Task results and the ORM queue: "Resubmit" ran a worker task again from here, past the services'
# callers, and deleted its failure row; a queued task could be deleted or re-keyed. The sign-in
# throttle: deleting a lock-out let a password guesser go on at once and erased its trace (its
# "Clean up expired attempts" was a 500: axes' handler needs a request its middleware marked).
# None of these is an operator action DEPLOYMENT.md names, and none left an audit row. A lock-out
# ends on its own after AXES_COOLOFF_MINUTES or at a successful sign-in; an operator ends one
# sooner with ``manage.py signin_unlock`` (tenants.signin_lockouts), which writes an audit row and
# keeps axes' logs of the failures.
for _model, _library_admin in (
    (Success, TaskAdmin),
    (Failure, FailAdmin),
    (OrmQ, QueueAdmin),
    (AccessAttempt, AccessAttemptAdmin),
    (AccessLog, AccessLogAdmin),
    (AccessFailureLog, AccessFailureLogAdmin),
):
    # OrmQ is registered only with the ORM broker, axes' only with AXES_ENABLE_ADMIN.
    if admin.site.is_registered(_model):
        admin.site.unregister(_model)
        admin.site.register(
            _model, type(_library_admin.__name__, (ReadOnlyLibraryAdmin, _library_admin), {})
        )
