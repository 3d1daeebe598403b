"""The HTTP edge: what every request passes through before and after a domain's route."""
