"""Weave tracing of the loop's steps: on when WANDB_API_KEY and WEAVE_PROJECT are set, otherwise off and free."""

import logging
import os

import weave

log = logging.getLogger("codreamer")


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


def traced(fn):
    return weave.op(fn, postprocess_inputs=_summarize)


def tracing() -> bool:
    return os.environ.get("WEAVE_DISABLED", "").lower() not in ("true", "1")


async def call_with_trace(op, *args, **kwargs) -> tuple[object, str | None]:
    """The op's result and, when tracing, the link to its trace in Weave."""
    if not tracing():
        return await op(*args, **kwargs), None
    result, call = await op.call(*args, __should_raise=True, **kwargs)
    return result, call.ui_url


def init_tracing(wandb_api_key: str | None, weave_project: str | None) -> bool:
    """Never prompts and never fails start-up: an unreachable Weave only logs a warning."""
    if not (wandb_api_key and weave_project):
        os.environ["WEAVE_DISABLED"] = "true"
        return False
    os.environ.setdefault("WANDB_API_KEY", wandb_api_key)
    try:
        weave.init(weave_project)
    except Exception as exc:
        os.environ["WEAVE_DISABLED"] = "true"
        log.warning("Weave tracing is off: %s", exc)
        return False
    return True
