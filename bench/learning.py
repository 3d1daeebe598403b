"""Learning: reward curves of full learning vs GRPO only vs KG reweighting only vs neither, against
the best reward the feedback simulator's hidden preferences allow (the ceiling)."""

import asyncio
import itertools
import os
import tempfile
from pathlib import Path
from concurrent.futures import ProcessPoolExecutor

import numpy as np

VARIANTS = {"full": (True, True), "grpo_only": (True, False), "kg_only": (False, True), "neither": (False, False)}


def _curve(args: tuple[str, int, int]) -> tuple[str, int, list[float]]:
    """One run through the service's own workflow (`app.local`), as `codreamer run` executes it."""
    variant, seed, iterations = args
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ["WEAVE_DISABLED"] = "true"
    import app  # noqa: F401
    from app.local import iterations as run_iterations, local_service, run_to_end
    from app.runs.schemas import LearnLoopRequest
    from app.settings import Settings

    async def run():
        train, reweight = VARIANTS[variant]
        request = LearnLoopRequest(iterations=iterations, rollouts_per_group=4, seed=seed,
                                   train_policy=train, reweight_graph=reweight)
        with tempfile.TemporaryDirectory(prefix="codreamer-bench-") as data_dir:
            async with local_service(Path(data_dir), Settings(_env_file=None)) as process:
                finished = await run_to_end(process, request)
                records = await run_iterations(process, finished["run_id"])
        return [r["rewards"]["mean"] for r in records[1:]]

    return variant, seed, asyncio.run(run())


def ceiling(feedback_weight: float = 0.3, candidates: int = 10, max_citations: int = 4) -> dict[str, float]:
    """Per scenario, the best expected reward of any email: which read nodes to cite, and the angle.

    An upper bound: it ignores whether the agent could reach those nodes within its turns.
    """
    from app.backends.embedded.composer import CTAS, LENGTHS, TONES, compose
    from app.backends.embedded.judge import grade
    from app.backends.embedded.policy import ProspectView
    from app.knowledge_graph.service import demo_graph, hidden_preferences
    from app.loop.feedback import reply_probabilities
    from app.agent.schemas import Email
    from app.agent.transcript import SeenNode, Transcript

    graph, preferences = demo_graph(), hidden_preferences("demo")
    best = {}
    for scenario in graph.scenarios.values():
        prospect, prefs = scenario.prospect.model_dump(), preferences[scenario.id]
        view = ProspectView(prospect)
        nodes = [SeenNode(n.id, n.type, n.title, 1.0, n.text, tuple(n.tags)) for n in graph.nodes.values()]
        ranked = sorted(nodes, key=lambda n: -(sum(view.relevance(n)) + 2 * prefs["interests"].get(n.id, 0)))[:candidates]
        top = 0.0
        for size in range(1, max_citations + 1):
            for cited in itertools.combinations(ranked, size):
                for tone, length, cta in itertools.product(TONES, LENGTHS, CTAS):
                    subject, body = compose(prospect, list(cited), tone, length, cta, goal=scenario.goal)
                    email = Email(subject=subject, body=body, citations=[n.id for n in cited])
                    transcript = Transcript(prospect=prospect, nodes={n.id: n for n in cited}, turns=size + 1, final_email=email)
                    judge_score, _ = grade(transcript)
                    p_open, p_reply = reply_probabilities(email, prospect, prefs)
                    reward = (1 - feedback_weight) * judge_score + feedback_weight * (0.4 * p_open + 0.6 * p_reply)
                    top = max(top, reward)
        best[scenario.id] = top
    return best


def measure(iterations: int = 20, seeds: tuple[int, ...] = (0, 1, 2), workers: int = 2) -> dict:
    jobs = [(variant, seed, iterations) for variant in VARIANTS for seed in seeds]
    with ProcessPoolExecutor(workers) as pool:
        runs = list(pool.map(_curve, jobs))
    curves = {v: np.mean([c for variant, _, c in runs if variant == v], axis=0).tolist() for v in VARIANTS}
    per_scenario = ceiling()
    top = float(np.mean(list(per_scenario.values())))
    at = {v: {str(i): curves[v][i - 1] / top for i in (1, 10, iterations)} for v in VARIANTS}
    return {"iterations": iterations, "seeds": list(seeds), "curves": curves, "ceiling": top,
            "ceiling_per_scenario": per_scenario, "fraction_of_ceiling": at}


def plot(result: dict, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    x = range(1, result["iterations"] + 1)
    for variant, curve in result["curves"].items():
        ax.plot(x, curve, label=variant.replace("_", " "), marker="o", markersize=3)
    ax.axhline(result["ceiling"], color="grey", linestyle="--", label="ceiling (hidden preferences)")
    ax.set_xlabel("iteration")
    ax.set_ylabel(f"mean reward ({len(result['seeds'])} seeds)")
    ax.set_title("Learning on the demo graph (K=4, 10 scenarios)")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
