"""Building blocks below every app (imports no app of ours): sealing secrets at rest."""
