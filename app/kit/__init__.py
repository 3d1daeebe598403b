"""Plumbing every domain may use: database, settings, logs, auth, errors, pages, processes. Imports no domain."""
