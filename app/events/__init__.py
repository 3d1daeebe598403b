"""Signed, retried webhook deliveries of run events (Standard Webhooks), from a database outbox."""
