"""The worker half of the service: what a worker process holds to execute durable workflows (backends, judges, models)."""
