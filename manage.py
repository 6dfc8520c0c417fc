#!/usr/bin/env python
import os
import sys

from config import dbserver
from config.env import SettingsError


def main() -> None:
    if dbserver.is_stop_only(sys.argv):
        if not dbserver.stop():
            sys.exit(f"CommandError: {dbserver.NOT_RUNNING}")
        print(dbserver.STOPPED)
        return
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except SettingsError as refused:
        # A setting our settings code refused: the reason names the variable, and the frames
        # of Django's settings import above it say nothing more (config.env.SettingsError).
        sys.exit(str(refused))


if __name__ == "__main__":
    main()
