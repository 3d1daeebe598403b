"""A CPU-only ART backend: a small trainable policy behind an OpenAI-compatible model server, a child process on loopback."""

__all__ = ["EmbeddedBackend"]


def __getattr__(name: str):
    # Lazy, so the model server's own process (`python -m app.backends.embedded.server`) does not import ART.
    if name == "EmbeddedBackend":
        from app.backends.embedded.backend import EmbeddedBackend

        return EmbeddedBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
