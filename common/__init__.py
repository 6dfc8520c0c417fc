"""Building blocks below every app (imports no app of ours): sealing secrets at rest, and the
counters that keep ``/metrics`` cheap (``counters.py``)."""
