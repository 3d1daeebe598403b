"""Every subject's event log (runs, graphs, draft batches), its live streams, and its signed, retried webhook deliveries
(Standard Webhooks) from a database outbox."""
