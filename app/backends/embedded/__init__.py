"""A CPU-only ART backend: a small trainable policy behind an OpenAI-compatible server on loopback."""

from app.backends.embedded.backend import EmbeddedBackend

__all__ = ["EmbeddedBackend"]
