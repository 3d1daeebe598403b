"""In-context learning, for a model that cannot train: per scenario, the best email so far and the judge's lessons."""

import re
from collections.abc import Mapping

import art

from app.agent.schemas import Exemplar, ScenarioContext
from app.kit.observability import traced
from app.loop.email import best_trajectory
from app.loop.schemas import RunConfig

PLAYBOOK_SIZE = 4  # lessons per scenario in a prompt: a short list an LLM reads, not a log
LESSON_CHARS = 240  # each lesson at most this long
LESSON_GAP = 0.1  # a criterion separates best from worst when their scores differ by a tenth of the scale
_EXPLANATION = "RULER explanation: "
_CRITERION = re.compile(r"^\s*([A-Za-z][A-Za-z _/-]*?)\s*[:=]?\s+(-?\d+(?:\.\d+)?)\s*$")


def explanation(trajectory: art.Trajectory) -> str:
    """The judge's explanation of its score, which RULER logs into the trajectory."""
    return next((line.removeprefix(_EXPLANATION) for line in reversed(trajectory.logs) if line.startswith(_EXPLANATION)), "")


def criteria(text: str) -> dict[str, float]:
    """`criterion score` pairs, when the whole explanation is a list of them ("relevance 0.80, tone 0.5")."""
    pairs = {}
    for part in re.split(r"[,;\n]", text):
        if not part.strip():
            continue
        match = _CRITERION.match(part)
        if not match:
            return {}
        pairs[match.group(1).strip()] = float(match.group(2))
    return pairs


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= LESSON_CHARS else text[: LESSON_CHARS - 1].rstrip() + "…"


def lessons(group: art.TrajectoryGroup, iteration: int) -> list[str]:
    """What separated the group's best email from its worst, in the judge's words.

    A judge that scores by criterion ("grounding 1.00, relevance 0.40, …") gives one lesson per
    criterion on which the best email beat the worst by at least LESSON_GAP, the widest gaps first;
    any other judge's explanations of the best and the worst email are quoted, clipped.
    """
    ranked = sorted((t for t in group.trajectories if t.email is not None), key=lambda t: (-t.reward, t.rollout))
    if len(ranked) < 2 or ranked[0].reward - ranked[-1].reward < 1e-9:
        return []
    best, worst = ranked[0], ranked[-1]
    best_text, worst_text = explanation(best), explanation(worst)
    best_parts, worst_parts = criteria(best_text), criteria(worst_text)
    if best_parts and worst_parts:
        gaps = sorted(((best_parts[k] - worst_parts[k], k) for k in best_parts.keys() & worst_parts.keys()), key=lambda gk: (-gk[0], gk[1]))
        return [_clip(f"{k}: {best_parts[k]:.2f} in the best email vs {worst_parts[k]:.2f} in the worst "
                      f"(iteration {iteration}); raise it.") for gap, k in gaps if gap >= LESSON_GAP]
    found = []
    if best_text:
        found.append(_clip(f"What worked (iteration {iteration}, reward {best.reward:.2f}): {best_text}"))
    if worst_text:
        found.append(_clip(f"What fell short (iteration {iteration}, reward {worst.reward:.2f}): {worst_text}"))
    return found


def _lesson_key(lesson: str) -> str:
    return lesson.split(":", 1)[0].split(" (iteration", 1)[0]


@traced
def distil(
    previous: Mapping[str, ScenarioContext] | None, groups: list[art.TrajectoryGroup], config: RunConfig, *, iteration: int
) -> dict[str, ScenarioContext] | None:
    """In-context learning: per scenario, the best email so far and a short playbook, for the next prompts.

    The exemplar is replaced when this iteration wrote an email with a higher reward. The playbook
    keeps at most PLAYBOOK_SIZE lessons, newest first; a new lesson replaces an older one about the
    same criterion. None when the run does not learn in context.
    """
    if not config.in_context:
        return None
    context = {scenario_id: entry.model_copy(deep=True) for scenario_id, entry in (previous or {}).items()}
    for group in groups:
        if not group.trajectories:
            continue
        scenario_id = group.trajectories[0].scenario_id
        entry = context.setdefault(scenario_id, ScenarioContext())
        best = best_trajectory([group], scenario_id)
        if best is not None and (entry.exemplar is None or best.reward > entry.exemplar.reward):
            entry.exemplar = Exemplar(**best.email.model_dump(), reward=float(best.reward), iteration=iteration)
        new = lessons(group, iteration)
        keys = {_lesson_key(lesson) for lesson in new}
        entry.playbook = (new + [lesson for lesson in entry.playbook if _lesson_key(lesson) not in keys])[:PLAYBOOK_SIZE]
    return dict(sorted(context.items()))
