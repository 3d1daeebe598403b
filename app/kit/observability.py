"""Weave tracing of the loop's steps: on when WANDB_API_KEY and WEAVE_PROJECT are set, otherwise off and free.

Off, weave is never imported: that import alone costs every process (API, worker, CLI) about 1.5 s of CPU.
"""

import functools
import logging
import os

log = logging.getLogger("codreamer")
_enabled = False  # set by init_tracing once Weave is initialised


def _summarize(inputs: dict) -> dict:
    """Trace ids and sizes, not whole graphs, clients or score tables."""
    summary = {}
    for name, value in inputs.items():
        if hasattr(value, "scenarios") and hasattr(value, "nodes"):
            summary[name] = {"graph_id": value.id, "nodes": len(value.nodes)}
        elif hasattr(value, "model_name") and hasattr(value, "client"):
            summary[name] = value.model_name
        elif isinstance(value, (dict, list)) and len(value) > 20:
            summary[name] = f"<{type(value).__name__} of {len(value)}>"
        elif isinstance(value, (str, int, float, bool, type(None))):
            summary[name] = value
        else:
            summary[name] = type(value).__name__
    return summary


class traced:  # noqa: N801: a decorator
    """The function, or, once tracing is on, the same function as a Weave op (made at its first traced call)."""

    def __init__(self, fn):
        functools.update_wrapper(self, fn)
        self._fn, self._op = fn, None

    def op(self):
        if self._op is None:
            import weave

            self._op = weave.op(self._fn, postprocess_inputs=_summarize)
        return self._op

    def __call__(self, *args, **kwargs):
        return self.op()(*args, **kwargs) if tracing() else self._fn(*args, **kwargs)


def tracing() -> bool:
    return _enabled


async def call_with_trace(fn: traced, *args, **kwargs) -> tuple[object, str | None]:
    """The function's result and, when tracing, the link to its trace in Weave."""
    if not tracing():
        return await fn(*args, **kwargs), None
    result, call = await fn.op().call(*args, __should_raise=True, **kwargs)
    return result, call.ui_url


def init_tracing(wandb_api_key: str | None, weave_project: str | None) -> bool:
    """Never prompts and never fails start-up: an unreachable Weave only logs a warning."""
    global _enabled
    if not (wandb_api_key and weave_project):
        os.environ["WEAVE_DISABLED"] = "true"
        return False
    os.environ.setdefault("WANDB_API_KEY", wandb_api_key)
    try:
        import weave

        weave.init(weave_project)
    except Exception as exc:
        os.environ["WEAVE_DISABLED"] = "true"
        log.warning("Weave tracing is off: %s", exc)
        return False
    _enabled = True
    return True
