"""Learning in the simulated world (`app/simulation/`): what the loop's drafts earn from readers it cannot see into,
beside a rule with no learning (`bench/heuristic.py`) and the untrained policy, on the same market and prospects.

One run per seed, the demo as `codreamer run --iterations N` runs it (every scenario, K = 4, `feedback_source`
left to its default: the demo's simulated provider sends each published email to the world's readers, and the loop
learns from their replies through `POST /outcomes`'s path; never the world's probability itself). Everything goes
through the API in process (`POST /learn-loop`, `GET /runs/…/iterations/…`, `PUT /graphs/demo/deployment`,
`POST /drafts`). The world's market of the same seed scores each email by its reader's positive-reply probability
(`Reader.positive_reply_probability`: an interested or meeting reply), read only here.

- **The demo**: the run's mean reward (what `codreamer run` shows), mean of the last three iterations over
  iteration 1; the world's probability of the published emails (iteration 0, the untrained one, against the last
  three) beside the rule's email to the same target; the published emails' median length in words.
- **Transfer**: prospects from industries and roles absent from every training scenario (`unseen_prospects`),
  drafted by the run's last policy (deployed) and by its untrained policy (`<run>@0`), and written by the rule; the
  mean probability of each. Look-alikes of the demo's scenarios (`look_alikes`) are a second split, reported apart.
- **The judge against the world**: Spearman between the judge's score and the world's probability of every
  candidate email of the run (10 scenarios × 4 rollouts × N iterations), per seed; and what else in the text moves
  the world's probability (words, asks, names) next to how the judge scores the same.

`python -m bench world` (`WORLD_SEEDS`, `WORLD_ITERATIONS`, `WORLD_UNSEEN`, `WORLD_LOOK_ALIKES` change the sizes;
with `WORLD_SEEDS_FILE=path` each finished seed is kept there, and a measurement stopped half way goes on from it).
"""

import asyncio
import json
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SEEDS = 10
ITERATIONS = 10  # as `codreamer run --iterations 10`, the demo
UNSEEN = 100  # unseen-industry prospects per seed
LOOK_ALIKES = 50  # look-alikes of the demo's scenarios per seed
LATE = 3  # the demo's measure: the mean of the last three iterations over iteration 1
BOOTSTRAP = 2000
# The terms of a reader's impression (`app.simulation.readers.Impression`) that move its positive-reply probability
IMPRESSION = ("relevance", "ask", "length", "hollow", "off_industry", "names", "wrong")


@dataclass(frozen=True)
class Sizes:
    seeds: int = SEEDS
    iterations: int = ITERATIONS
    unseen: int = UNSEEN
    look_alikes: int = LOOK_ALIKES

    @classmethod
    def from_environment(cls) -> "Sizes":
        return cls(**{name: int(os.environ[f"WORLD_{name.upper()}"]) for name in cls.__dataclass_fields__
                      if f"WORLD_{name.upper()}" in os.environ})


def words(body: str) -> int:
    return len(body.split())


def _seed(args: tuple[int, Sizes]) -> dict:
    seed, sizes = args
    from bench.drafts import _environment

    _environment()
    from app.knowledge_graph.service import demo_document, demo_graph
    from app.outcomes.service import spearman
    from app.outcomes.simulated import SENDER
    from app.simulation.people import look_alikes, scenario_prospect, unseen_prospects
    from app.simulation.readers import Market, Received
    from bench import heuristic
    from bench.drafts import _ok, deploy, draft, learn, service

    graph, market = demo_graph(), Market(seed)  # the market the run's own sends reach (its seed's)

    def probability(prospect, subject: str, body: str) -> float:
        return market.reader(prospect).positive_reply_probability(Received(subject=subject, body=body, sender=SENDER))

    def negative(prospect, subject: str, body: str) -> float:
        return market.reader(prospect).negative_reply_probability(Received(subject=subject, body=body, sender=SENDER))

    async def go() -> dict:
        with tempfile.TemporaryDirectory(prefix="codreamer-bench-") as data_dir:
            async with service(Path(data_dir)) as api:
                started = time.monotonic()
                run = await learn(api.http, {"iterations": sizes.iterations, "seed": seed})
                run_s = time.monotonic() - started
                records = [await _ok(await api.http.get(f"/runs/{run['run_id']}/iterations/{n}"))
                           for n in range(sizes.iterations + 1)]
                splits = {"unseen": unseen_prospects(seed, sizes.unseen),
                          "look_alikes": look_alikes(demo_document().model_dump(), seed, sizes.look_alikes)}
                await deploy(api.http, f"{run['run_id']}@{sizes.iterations}")
                drafted = {}
                for split, prospects in splits.items():
                    body = [p.as_draft_prospect() for p in prospects]
                    _, drafted[(split, "trained")] = await draft(api.http, body, seed=seed)  # the deployment
                    _, drafted[(split, "untrained")] = await draft(api.http, body, seed=seed, policy=f"{run['run_id']}@0")
                return {"run": run, "records": records, "splits": splits, "drafted": drafted, "run_s": run_s,
                        "seconds": time.monotonic() - started}

    got = asyncio.run(go())
    records, target = got["records"], graph.scenarios[got["run"]["config"]["target_scenario_id"]]

    people = {s["id"]: scenario_prospect(s) for s in demo_document().model_dump()["scenarios"]}
    market.know(*people.values(), *(p for prospects in got["splits"].values() for p in prospects))  # all of its people

    # the demo: the run's reward, and the world's reading of the published emails and of the rule's
    target_person = people[target.id]
    rule = heuristic.write(graph, target.prospect.model_dump(), target.goal)
    rewards = [r["rewards"]["mean"] for r in records[1:]]
    published = [probability(target_person, r["email"]["subject"], r["email"]["body"]) for r in records]
    demo = {"rewards": rewards, "reward_ratio": float(np.mean(rewards[-LATE:]) / rewards[0]),
            "published_world": published, "rule_world": probability(target_person, rule.subject, rule.body),
            "published_words": [words(r["email"]["body"]) for r in records], "rule_words": words(rule.body)}

    # transfer: each split's drafts by the trained and untrained policies, and the rule's emails to the same people
    transfer = {}
    for split, prospects in got["splits"].items():
        entry = {}
        for policy in ("trained", "untrained"):
            drafts = got["drafted"][(split, policy)]
            assert [d["prospect"]["email"] for d in drafts] == [p.email for p in prospects]
            entry[policy] = float(np.mean([probability(p, d["email"]["subject"], d["email"]["body"]) if d["email"] else 0.0
                                           for p, d in zip(prospects, drafts, strict=True)]))
            entry[f"{policy}_negative"] = float(np.mean([negative(p, d["email"]["subject"], d["email"]["body"])
                                                         for p, d in zip(prospects, drafts) if d["email"]]))
            entry[f"{policy}_judge"] = float(np.mean([d["judge_score"] for d in drafts if d["judge_score"] is not None]))
            entry[f"{policy}_words"] = float(np.median([words(d["email"]["body"]) for d in drafts if d["email"]]))
            entry[f"{policy}_no_email"] = sum(d["email"] is None for d in drafts)
        written = [heuristic.write(graph, p.as_draft_prospect(), p.goal) for p in prospects]
        entry["heuristic"] = float(np.mean([probability(p, w.subject, w.body) for p, w in zip(prospects, written)]))
        entry["heuristic_negative"] = float(np.mean([negative(p, w.subject, w.body) for p, w in zip(prospects, written)]))
        entry["heuristic_words"] = float(np.median([words(w.body) for w in written]))
        transfer[split] = entry

    # the judge against the world, over every candidate of the run
    candidates = [(t["judge_score"], t["email"], t["scenario_id"]) for r in records[1:] for t in r["trajectories"]
                  if t["email"] and t["judge_score"] is not None]
    judge = [c[0] for c in candidates]
    world = [probability(people[s], e["subject"], e["body"]) for _, e, s in candidates]
    # what the world's readers weigh (their impression's terms, read only here) against what the judge follows
    impressions = [market.reader(people[s]).impression(Received(subject=e["subject"], body=e["body"], sender=SENDER))
                   for _, e, s in candidates]
    traits = {name: [float(getattr(i, name)) for i in impressions] for name in IMPRESSION}
    traits["words"] = [words(e["body"]) for _, e, _ in candidates]
    return {
        "seed": seed, "target": target.id, "run_s": round(got["run_s"], 1), "seconds": round(got["seconds"], 1),
        "demo": demo, "transfer": transfer,
        "judge": {"candidates": len(candidates), "spearman": spearman(judge, world),
                  "world_mean": float(np.mean(world)), "world_max": float(np.max(world)),
                  "traits": {name: {"world": spearman(values, world), "judge": spearman(values, judge)}
                             for name, values in traits.items()}},
    }


def ratio_interval(numerator: list[float], denominator: list[float], seed: int = 0) -> list[float]:
    """The 5th and 95th percentiles of mean(numerator) ÷ mean(denominator) over resamples of the seeds (a seed's
    pair stays together)."""
    top, bottom = np.array(numerator), np.array(denominator)
    draws = np.random.default_rng(seed).integers(0, len(top), size=(BOOTSTRAP, len(top)))
    return np.percentile(top[draws].mean(axis=1) / bottom[draws].mean(axis=1), [5, 95]).round(3).tolist()


def mean_interval(values: list[float], seed: int = 0) -> list[float]:
    """The 5th and 95th percentiles of the mean over resamples of the seeds."""
    data = np.array(values)
    draws = np.random.default_rng(seed).integers(0, len(data), size=(BOOTSTRAP, len(data)))
    return np.percentile(data[draws].mean(axis=1), [5, 95]).round(5).tolist()


def summary(per_seed: list[dict]) -> dict:
    """The figures over seeds: means with 90 % intervals from resampling the seeds, and the targets' counts."""
    out: dict = {"transfer": {}, "demo": {}, "judge": {}}
    for split in per_seed[0]["transfer"]:
        values = {k: [s["transfer"][split][k] for s in per_seed] for k in ("trained", "heuristic", "untrained")}
        out["transfer"][split] = {
            **{k: float(np.mean(v)) for k, v in values.items()},
            **{f"{k}_interval_90": mean_interval(v) for k, v in values.items()},
            "trained_over_heuristic": float(np.mean(values["trained"]) / np.mean(values["heuristic"])),
            "trained_over_heuristic_interval_90": ratio_interval(values["trained"], values["heuristic"]),
            "trained_over_untrained": float(np.mean(values["trained"]) / np.mean(values["untrained"])),
            "trained_over_untrained_interval_90": ratio_interval(values["trained"], values["untrained"]),
            "heuristic_over_untrained": float(np.mean(values["heuristic"]) / np.mean(values["untrained"])),
            "words": {k: float(np.median([s["transfer"][split][f"{k}_words"] for s in per_seed]))
                      for k in ("trained", "heuristic", "untrained")},
            "negative": {k: float(np.mean([s["transfer"][split][f"{k}_negative"] for s in per_seed]))
                         for k in ("trained", "heuristic", "untrained")},
            "judge": {k: float(np.mean([s["transfer"][split][f"{k}_judge"] for s in per_seed])) for k in ("trained", "untrained")},
        }
    ratios = [s["demo"]["reward_ratio"] for s in per_seed]
    late_world = [float(np.mean(s["demo"]["published_world"][-LATE:])) for s in per_seed]
    out["demo"] = {
        "reward_ratio_per_seed": ratios, "seeds_at_1_2": sum(r >= 1.2 for r in ratios),
        "reward_ratio_mean": float(np.mean(ratios)), "reward_ratio_interval_90": mean_interval(ratios),
        "median_published_words": float(np.median([w for s in per_seed for w in s["demo"]["published_words"][1:]])),
        "world_untrained": float(np.mean([s["demo"]["published_world"][0] for s in per_seed])),
        "world_late": float(np.mean(late_world)), "world_late_interval_90": mean_interval(late_world),
        "world_rule": float(np.mean([s["demo"]["rule_world"] for s in per_seed])),
    }
    rhos = [s["judge"]["spearman"] for s in per_seed]
    out["judge"] = {
        "spearman_per_seed": rhos, "seeds_at_0_3": sum(r is not None and r >= 0.3 for r in rhos),
        "spearman_median": float(np.median([r for r in rhos if r is not None])) if any(r is not None for r in rhos) else None,
        "candidates_min": min(s["judge"]["candidates"] for s in per_seed),
        "traits": {name: {who: _median([s["judge"]["traits"][name][who] for s in per_seed]) for who in ("world", "judge")}
                   for name in per_seed[0]["judge"]["traits"]},
    }
    return out


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(np.median(known)) if known else None


MEASURED_CODE = ("app", "bench/world.py", "bench/heuristic.py", "bench/drafts.py")  # what a seed's figures depend on


def code_version(paths: tuple[str, ...] = MEASURED_CODE) -> str:
    """The git objects of the code a seed's figures depend on (the service, the world, this benchmark), or "changed"
    when any of it differs from the commit: seeds kept from another commit count only when all of it is the same."""
    import subprocess

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=Path(__file__).parents[1], capture_output=True, text=True)

    if git("diff", "--quiet", "HEAD", "--", *paths).returncode != 0:
        return "changed"
    return ",".join(git("rev-parse", *(f"HEAD:{p}" for p in paths)).stdout.split())


def kept_seeds(path: Path | None, config: dict) -> dict[int, dict]:
    """The seeds a stopped measurement of the same code and sizes finished (one JSON line each in `path`), so it goes
    on where it stopped; nothing from other code or other sizes, nor from code not committed."""
    if path is None or not path.exists() or config.get("code") == "changed":
        return {}
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {line["result"]["seed"]: line["result"] for line in lines if line["config"] == config}


def keep_seed(path: Path | None, config: dict, result: dict) -> None:
    if path is not None:
        with path.open("a") as file:
            file.write(json.dumps({"config": config, "result": result}) + "\n")


def measure(sizes: Sizes | None = None, workers: int = 2) -> dict:
    from bench import commit

    sizes = sizes or Sizes.from_environment()
    path = Path(os.environ["WORLD_SEEDS_FILE"]) if os.environ.get("WORLD_SEEDS_FILE") else None
    config = {"code": code_version(), "sizes": {k: v for k, v in sizes.__dict__.items() if k != "seeds"}}
    kept = kept_seeds(path, config)
    todo = [seed for seed in range(sizes.seeds) if seed not in kept]
    started = time.monotonic()
    with ProcessPoolExecutor(workers) as pool:
        for done in as_completed([pool.submit(_seed, (seed, sizes)) for seed in todo]):
            result = done.result() | {"commit": commit()}
            kept[result["seed"]] = result
            keep_seed(path, config, result)
    per_seed = [kept[seed] for seed in range(sizes.seeds)]
    return {"sizes": sizes.__dict__, "late": LATE, "seconds": round(time.monotonic() - started, 1),
            "resumed_seeds": sorted(set(range(sizes.seeds)) - set(todo)),
            "load_average_after": [round(x, 2) for x in os.getloadavg()], "workers": workers,
            "per_seed": per_seed, **summary(per_seed)}
