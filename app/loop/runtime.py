"""Builds a loop's judge and feedback from settings (backends and models: app.backends.registry)."""

from app.backends.embedded import EmbeddedBackend
from app.knowledge_graph.graph import KnowledgeGraph
from app.knowledge_graph.service import hidden_preferences
from app.loop.feedback import FeedbackSimulator
from app.loop.steps import Judge
from app.settings import Settings


def create_judge(settings: Settings, embedded: EmbeddedBackend, name: str = "default") -> Judge:
    """The judge a run names: `default` is JUDGE_MODEL's, `embedded` the embedded server's, any other one of JUDGES.

    A model of `embedded` uses the embedded server's judge; anything else is a litellm model string.
    """
    if name == "default":
        model, base_url, api_key = settings.judge_model, settings.judge_base_url, settings.judge_api_key
    elif name == "embedded":
        model, base_url, api_key = "embedded", None, None
    else:
        spec = settings.judges[name]
        model, base_url, api_key = spec.model, spec.base_url, spec.api_key
    if model == "embedded":
        params = {"api_base": embedded.base_url, "api_key": embedded.api_key}
        return Judge(f"openai/{embedded.judge_model_name}", params, settings.judge_retries)
    params = {k: v for k, v in {"api_base": base_url, "api_key": api_key}.items() if v}
    return Judge(model, params, settings.judge_retries)


def create_feedback(graph: KnowledgeGraph) -> FeedbackSimulator | None:
    """Only graphs with hidden preferences (the demo) get simulated online feedback."""
    preferences = hidden_preferences(graph.id)
    if preferences is None or not set(graph.scenarios) <= set(preferences):
        return None
    return FeedbackSimulator(preferences, {s.id: s.prospect.model_dump() for s in graph.scenarios.values()})
