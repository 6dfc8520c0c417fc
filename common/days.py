"""The days date filters accept (the audit log, analytics; the UI and the API): no record is
older than the first, and the calendar's ends (years 1 and 9999) are where date arithmetic
overflows, so a day outside is a clear form error rather than a crash."""

from __future__ import annotations

from datetime import date

from django.core.validators import MaxValueValidator, MinValueValidator

FIRST_DAY = date(2000, 1, 1)
LAST_DAY = date(8999, 12, 31)
DAY_VALIDATORS = (MinValueValidator(FIRST_DAY), MaxValueValidator(LAST_DAY))
