"""Pipelining: iterations per hour with `max_steps_off_policy` 0, 1 and 2, and what overlapping costs learning.

Throughput: one run per setting through the service's own workflow (`app.lifecycle.local`, as `codreamer run`), on the
embedded backend with the orchestration benchmark's latencies injected into its model server (`LATENCY_AT`:
0.5 s a policy turn, 2 s a judge call, 3 s a GRPO step, during which it keeps serving), so the run waits on
its backend as it would on a hosted one. The rate counts iterations 1..N from the baseline's record to the
last record.

Learning: the demo, 3 seeds × 20 iterations, embedded backend without injected latency, strict order against
`max_steps_off_policy` 1; the measure is the learning benchmark's (each iteration's mean reward, iterations
16–20), on its `full` variant.
"""

import asyncio
import os
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from bench import learning, run_in_process

LATENCIES = {"model": 0.5, "judge": 2.0, "train": 3.0}
SETTINGS = (0, 1, 2)
THROUGHPUT_RUN = {"iterations": 6, "rollouts_per_group": 4, "max_turns": 4, "scenario_ids": ["scn-healthcare-cto"],
                  "feedback_source": "none"}


def _throughput(off_policy: int) -> dict:
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ["WEAVE_DISABLED"] = "true"
    os.environ["LATENCY_AT"] = ",".join(f"{kind}:{seconds}" for kind, seconds in LATENCIES.items())
    import app  # noqa: F401
    from app.runs.schemas import LearnLoopRequest

    finished, records = asyncio.run(run_in_process(LearnLoopRequest(max_steps_off_policy=off_policy, **THROUGHPUT_RUN)))
    assert finished["status"] == "succeeded", finished
    seconds = (records[-1]["finished_at"] - records[0]["finished_at"]).total_seconds()
    iterations = len(records) - 1
    return {"max_steps_off_policy": off_policy, "iterations": iterations, "seconds": round(seconds, 1),
            "iterations_per_hour": round(3600 * iterations / seconds, 1),
            "steps_off_policy": [r["training"]["metrics"].get("steps_off_policy") for r in records[1:]]}


def measure(seeds=(0, 1, 2), iterations: int = 20) -> dict:
    with ProcessPoolExecutor(max_workers=1) as pool:  # one at a time: the rates must not share the cores
        throughput = list(pool.map(_throughput, SETTINGS))
    strict = throughput[0]["iterations_per_hour"]
    jobs = [("demo", "full", seed, iterations, {"max_steps_off_policy": s}) for s in (0, 1) for seed in seeds]
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        runs = list(pool.map(learning._curve, jobs))
    late = slice(iterations - learning.LATE, iterations)
    per_seed = {s: [round(float(np.mean(r["rewards"][late])), 4) for r in runs if r["overrides"]["max_steps_off_policy"] == s]
                for s in (0, 1)}
    return {
        "latencies": LATENCIES, "run": THROUGHPUT_RUN, "throughput": throughput,
        "speedup": {str(t["max_steps_off_policy"]): round(t["iterations_per_hour"] / strict, 2) for t in throughput},
        "learning": {"seeds": list(seeds), "iterations": iterations, "late_reward_per_seed": {str(s): v for s, v in per_seed.items()},
                     "late_reward": {str(s): float(np.mean(v)) for s, v in per_seed.items()},
                     "difference": float(np.mean(per_seed[1]) - np.mean(per_seed[0]))},
    }
