"""Learning: reward curves of each way the loop can learn, side by side, through the service's own
workflow, on the demo graph (the judge blended with the world's oracle) and on a generated graph (judge only).
What the emails earn from the world's readers, beside a rule with no learning, is `bench/world.py`'s.

Variants: full (GRPO + KG reweighting), GRPO only, KG only, neither, and in-context (no GRPO: KG
reweighting plus the distilled exemplar and playbook in the prompts, as a fixed hosted model learns).
"""

import asyncio
import os
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

VARIANTS = {
    "full": {"train_policy": True, "reweight_graph": True, "in_context": False},
    "grpo_only": {"train_policy": True, "reweight_graph": False, "in_context": False},
    "kg_only": {"train_policy": False, "reweight_graph": True, "in_context": False},
    "neither": {"train_policy": False, "reweight_graph": False, "in_context": False},
    "in_context": {"train_policy": False, "reweight_graph": True, "in_context": True},
}
GRAPHS = ("demo", "synthetic")
SYNTHETIC_SEED = 0  # the generated graph: synthetic_document(0)
LATE = 5  # the late reward: the mean of the last five iterations (16-20 of 20)


def _curve(args: tuple) -> dict:
    """One run through the service's own workflow (`app.lifecycle.local`), as `codreamer run` executes it; a fifth element
    overrides request fields (the pipelining benchmark's)."""
    graph, variant, seed, iterations, *rest = args
    overrides = rest[0] if rest else {}
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ["WEAVE_DISABLED"] = "true"
    import app  # noqa: F401
    from app.kit.settings import Settings
    from app.lifecycle.local import add_graph, local_service, run_to_end
    from app.runs import repository
    from app.runs.schemas import LearnLoopRequest
    from app.simulation.graphs import synthetic_document

    async def run():
        document = synthetic_document(SYNTHETIC_SEED) if graph == "synthetic" else None
        request = LearnLoopRequest(graph_id=document.id if document else "demo", iterations=iterations,
                                   rollouts_per_group=4, seed=seed, **VARIANTS[variant] | overrides,
                                   # what these curves have always measured: the oracle on the demo, the judge alone elsewhere
                                   feedback_source="none" if document else "oracle")
        with tempfile.TemporaryDirectory(prefix="codreamer-bench-") as data_dir:
            async with local_service(Path(data_dir), Settings(_env_file=None)) as process:
                if document:
                    await add_graph(process, document)
                finished = await run_to_end(process, request)
                async with process.api.db.read() as session:
                    records = [await repository.iteration_detail(session, finished["run_id"], i) for i in range(iterations + 1)]
        return finished, records

    finished, records = asyncio.run(run())
    assert finished["status"] == "succeeded", finished
    first = records[1]["trajectories"]
    return {
        "graph": graph, "variant": variant, "seed": seed, "overrides": overrides,
        "rewards": [r["rewards"]["mean"] for r in records[1:]],
        "cite_nothing_iteration_1": float(np.mean([not (t["email"] and t["email"]["citations"]) for t in first])),
        "published_scores": [r["email"]["score"] for r in records],
        "final_email_iteration": finished["final_email"]["iteration"],
    }


def measure(iterations: int = 20, seeds: tuple[int, ...] = (0, 1, 2), workers: int = 2) -> dict:
    jobs = [(graph, variant, seed, iterations) for graph in GRAPHS for variant in VARIANTS for seed in seeds]
    with ProcessPoolExecutor(workers) as pool:
        runs = list(pool.map(_curve, jobs))

    def mean_curve(graph, variant, key="rewards"):
        return np.mean([r[key] for r in runs if r["graph"] == graph and r["variant"] == variant], axis=0).tolist()

    late = list(range(max(0, iterations - LATE), iterations))  # indices into the curves
    result = {"iterations": iterations, "seeds": list(seeds), "synthetic_graph": f"synthetic-{SYNTHETIC_SEED}",
              "late_iterations": [i + 1 for i in late], "graphs": {}, "runs": runs}
    for graph in GRAPHS:
        curves = {v: mean_curve(graph, v) for v in VARIANTS}
        entry = {
            "curves": curves,
            "late_mean": {v: float(np.mean([c[i] for i in late])) for v, c in curves.items()},
            "late_mean_per_seed": {v: [float(np.mean([r["rewards"][i] for i in late])) for r in runs
                                       if r["graph"] == graph and r["variant"] == v] for v in VARIANTS},
            "cite_nothing_iteration_1": float(np.mean([r["cite_nothing_iteration_1"] for r in runs if r["graph"] == graph])),
            "published_score_mean": {v: float(np.mean(mean_curve(graph, v, "published_scores"))) for v in VARIANTS},
        }
        result["graphs"][graph] = entry
    return result


def plot(result: dict, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    graphs = list(result["graphs"])
    fig, axes = plt.subplots(1, len(graphs), figsize=(6.2 * len(graphs), 4.4), squeeze=False)
    x = range(1, result["iterations"] + 1)
    for ax, graph in zip(axes[0], graphs):
        entry = result["graphs"][graph]
        for variant, curve in entry["curves"].items():
            ax.plot(x, curve, label=variant.replace("_", " "), marker="o", markersize=3)
        ax.set_xlabel("iteration")
        ax.set_ylabel(f"mean reward ({len(result['seeds'])} seeds)")
        ax.set_title("demo graph (judge + feedback, 10 scenarios)" if graph == "demo"
                     else f"{result['synthetic_graph']} (judge only, 4 scenarios)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=9, frameon=False)
    fig.suptitle("Learning, K=4 rollouts per scenario, through the service's workflow")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=120)
