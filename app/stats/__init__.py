"""Statistics the domains share: intervals, the off-policy estimators, the traffic bandit. Imports no domain."""
