"""django-q2's ``qcluster``, refused on a database that lacks a migration of this release, as
every other command is (``common.cli.MigratedDatabase``). django-q2's own checks nothing: during a
rolling upgrade (DEPLOYMENT.md "Upgrading") a worker host restarted before ``migrate`` ran the new
release's tasks on the old schema. Started while PostgreSQL does not answer, the cluster waits for
it as before (``--run-once`` excepted: it has nothing to wait for).
Here because this app comes before ``django_q`` in INSTALLED_APPS, so that this command wins."""

from django_q.management.commands import qcluster

from common.cli import MigratedDatabase, OptionsOnce


class Command(MigratedDatabase, OptionsOnce, qcluster.Command):
    def waits_for_database(self, options: dict) -> bool:
        return not options["run_once"]
