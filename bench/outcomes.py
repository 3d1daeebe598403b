"""Outcomes: how much of what the oracle teaches the loop comes back through real-shaped outcomes, and how fast
provider events go in.

Learning, on the demo's target scenario, through the service's own workflow: judge only
(`feedback_source: none`), the oracle (every candidate rated at once), outcomes of the published
email only (`simulated`: the demo's provider sends it to 50 look-alikes), and outcomes of A/B sends
(`simulated_ab`: every candidate to 10 more). The measure is the true reply probability of each
published email, P(open) · P(reply | open) from the simulator's hidden preferences, which only this
benchmark reads; and the judge's own score of it.

Ingestion: SendGrid-format batches of 1,000 events, signed, POSTed 4 at a time to a live `codreamer serve`
on PostgreSQL; then each batch 4 more times, concurrently, which must add nothing.
"""

import asyncio
import base64
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from bench import run_in_process

VARIANTS = {
    "judge_only": {"feedback_source": "none"},
    "oracle": {"feedback_source": "oracle"},
    "outcomes_published": {"feedback_source": "simulated"},
    "outcomes_ab": {"feedback_source": "simulated", "simulated_ab": True},
}
TARGET = "scn-healthcare-cto"
LATE = slice(15, 20)  # iterations 16-20 of 20
CONCURRENT_POSTS = 4  # batches in flight at once, as a provider's webhook sender keeps a few connections


def _curve(args: tuple[str, int, int]) -> dict:
    variant, seed, iterations = args
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ["WEAVE_DISABLED"] = "true"
    import app  # noqa: F401
    from app.agent.schemas import Email
    from app.knowledge_graph.service import demo_graph
    from app.loop.feedback import create_feedback, reply_probabilities
    from app.runs.schemas import LearnLoopRequest

    request = LearnLoopRequest(iterations=iterations, rollouts_per_group=4, seed=seed, scenario_ids=[TARGET],
                               **VARIANTS[variant])
    finished, records = asyncio.run(run_in_process(request))
    assert finished["status"] == "succeeded", finished
    simulator = create_feedback(demo_graph())
    prospect, preferences = simulator.prospects[TARGET], simulator.preferences[TARGET]

    def true_reply(email: dict) -> float:
        p_open, p_reply = reply_probabilities(Email.model_validate(email), prospect, preferences)
        return p_open * p_reply

    return {"variant": variant, "seed": seed,
            "true_reply": [true_reply(r["email"]) for r in records[1:]],
            "judge": [r["email"]["score"] for r in records[1:]]}


def _recovered(runs: list[dict], seeds: tuple[int, ...]) -> dict:
    """Each variant's late true reply probability over `seeds`, and the share of the oracle's gain over judge only
    that each outcome variant recovers."""
    late = {v: float(np.mean([np.mean(r["true_reply"][LATE]) for r in runs if r["variant"] == v and r["seed"] in seeds]))
            for v in VARIANTS}
    gain = late["oracle"] - late["judge_only"]
    share = {v: (late[v] - late["judge_only"]) / gain if gain > 1e-9 else None for v in ("outcomes_published", "outcomes_ab")}
    return {"seeds": list(seeds), "late_true_reply": late, "recovered_published": share["outcomes_published"],
            "recovered_ab": share["outcomes_ab"]}


SEEDS = 20  # a seed's late mean is one or two plateaus of the published email: over 6 seeds, A/B's share was 27% to 152%
BOOTSTRAP = 2000  # resamples of the seeds for each share's 90% interval


def _interval(per_seed: dict[str, list[float]]) -> dict[str, list[float]]:
    """The 5th and 95th percentiles of each outcome variant's recovered share over resamples of the seeds."""
    late = {v: np.array(values) for v, values in per_seed.items()}
    rng = np.random.default_rng(0)
    draws = rng.integers(0, len(late["oracle"]), size=(BOOTSTRAP, len(late["oracle"])))
    means = {v: values[draws].mean(axis=1) for v, values in late.items()}
    gain = means["oracle"] - means["judge_only"]
    shares = {v: (means[v] - means["judge_only"])[gain > 1e-9] / gain[gain > 1e-9] for v in ("outcomes_published", "outcomes_ab")}
    return {v: np.percentile(share, [5, 95]).round(3).tolist() for v, share in shares.items()}


def plot(learning: dict, path) -> None:
    """True reply probability of the published email per iteration, each variant's mean over the seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(7.2, 4.4))
    x = range(1, learning["iterations"] + 1)
    for variant, curve in learning["curves"].items():
        ax.plot(x, curve, label=variant.replace("_", " "), marker="o", markersize=3)
    ax.axvspan(LATE.start + 0.5, LATE.stop + 0.5, color="grey", alpha=0.1, label="iterations measured")
    ax.set_xlabel("iteration")
    ax.set_ylabel(f"true reply probability ({len(learning['seeds'])} seeds)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
    ax.set_title(f"Learning from outcomes: the published email, {TARGET}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def measure_learning(seeds=tuple(range(SEEDS)), iterations: int = 20) -> dict:
    """Every variant on each seed. The issue's measure is 3 seeds; the first 3 are reported as such, and all of them
    too, because seeds differ by more than the variants do, with a 90% interval from resampling the seeds (each
    resample keeps a seed's variants together, as they share its first iterations)."""
    jobs = [(variant, seed, iterations) for variant in VARIANTS for seed in seeds]
    started = time.monotonic()
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        runs = list(pool.map(_curve, jobs))
    per_seed = {v: [round(float(np.mean(r["true_reply"][LATE])), 4) for r in runs if r["variant"] == v] for v in VARIANTS}
    judge = {v: float(np.mean([np.mean(r["judge"][LATE]) for r in runs if r["variant"] == v])) for v in VARIANTS}
    every = _recovered(runs, tuple(seeds))
    return {
        "seeds": list(seeds), "iterations": iterations, "seconds": round(time.monotonic() - started, 1),
        "late_true_reply": every["late_true_reply"], "late_true_reply_per_seed": per_seed, "late_judge": judge,
        "recovered_published": every["recovered_published"], "recovered_ab": every["recovered_ab"],
        "first_three": _recovered(runs, tuple(seeds[:3])),
        "interval_90": _interval(per_seed),
        "judge_drop_vs_judge_only": {v: judge["judge_only"] - judge[v] for v in VARIANTS},
        "curves": {v: np.mean([r["true_reply"] for r in runs if r["variant"] == v], axis=0).round(4).tolist() for v in VARIANTS},
    }


def measure_ingestion(workdir: Path, batches: int = 20, per_batch: int = 1000, replays: int = 4) -> dict:
    """Signed SendGrid batches into PostgreSQL through a live server; then the same batches replayed concurrently."""
    import httpx
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    from tests.support import FreshPostgresDatabase, Server

    database = FreshPostgresDatabase()
    server = Server(workdir, {"DATABASE_URL": database.url, "EXECUTOR_ID": "ingest-bench"}).start(timeout=180)
    try:
        with server.client() as client:
            run_id = client.post("/learn-loop", json={"iterations": 1, "rollouts_per_group": 2, "scenario_ids": [TARGET],
                                                      "feedback_source": "none"}).json()["run_id"]
            while client.get(f"/runs/{run_id}").json()["status"] not in ("succeeded", "failed"):
                time.sleep(0.5)
            detail = client.get(f"/runs/{run_id}/iterations/1").json()
            refs = [detail["email"]["ref"]] + [t["email"]["ref"] for t in detail["trajectories"] if t["email"]]
            private = ec.generate_private_key(ec.SECP256R1())
            public = base64.b64encode(private.public_key().public_bytes(
                serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)).decode()
            hook = client.post("/outcome-sources", json={"provider": "sendgrid", "verification_key": public}).json()["url"]

        kinds = ("delivered", "open", "click", "delivered", "open")

        def signed(n: int) -> tuple[bytes, dict]:
            records = [{"email": f"r{n}-{i}@example.org", "timestamp": 1763631000 + i, "event": kinds[i % len(kinds)],
                        "sg_event_id": f"bench-{n}-{i}", "codreamer_ref": refs[i % len(refs)]} for i in range(per_batch)]
            body = json.dumps(records).encode()
            stamp = str(int(time.time()))
            signature = private.sign(stamp.encode() + body, ec.ECDSA(hashes.SHA256()))
            return body, {"X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(signature).decode(),
                          "X-Twilio-Email-Event-Webhook-Timestamp": stamp, "Content-Type": "application/json"}

        async def post_all(requests) -> list[dict]:
            gate = asyncio.Semaphore(CONCURRENT_POSTS)

            async def post(http, body, headers):
                async with gate:
                    return await http.post(hook, content=body, headers=headers)

            async with httpx.AsyncClient(base_url=server.url, timeout=120) as http:
                answers = await asyncio.gather(*(post(http, body, headers) for body, headers in requests))
            assert all(a.status_code == 200 for a in answers), [a.text for a in answers if a.status_code != 200][:3]
            return [a.json() for a in answers]

        requests = [signed(n) for n in range(batches)]
        started = time.monotonic()
        first = asyncio.run(post_all(requests))
        seconds = time.monotonic() - started
        replayed = asyncio.run(post_all([r for r in requests for _ in range(replays)]))
        with server.client() as client:
            stored = sum(e["sends"] > 0 for e in client.get(f"/runs/{run_id}/outcomes").json()["data"])
        return {
            "events": batches * per_batch, "batch": per_batch, "seconds": round(seconds, 2),
            "events_per_s": round(batches * per_batch / seconds), "accepted": sum(a["accepted"] for a in first),
            "replayed": len(replayed) * per_batch, "replay_accepted": sum(a["accepted"] for a in replayed),
            "replay_duplicates": sum(a["duplicates"] for a in replayed), "emails_with_outcomes": stored,
        }
    finally:
        server.stop()
        database.drop()


def off_pain_fact(scenario_id: str = TARGET) -> str:
    """The fact the off-pain case rewards: the first node (by id) one hop from the target's start nodes that is not
    context and none of whose sentences speaks to any of the prospect's pains; neither the judge nor the graph
    favours it."""
    from app.agent.email_checks import speaks_to
    from app.agent.text import sentences, terms
    from app.backends.embedded.composer import is_context
    from app.knowledge_graph.service import demo_graph

    graph = demo_graph()
    scenario = graph.scenarios[scenario_id]
    near = sorted({n.id for seed in scenario.seed_nodes for n in graph.neighbors(seed)} - set(scenario.seed_nodes))
    return next(node for node in near if not is_context(graph.nodes[node].type) and not any(
        speaks_to(terms(s), pain) for s in sentences(graph.nodes[node].text) for pain in scenario.prospect.pains))


OFF_PAIN_VARIANTS = {
    "judge_only": {"feedback_source": "none"},
    "outcomes_published": {"feedback_source": "simulated"},
    "outcomes_ab": {"feedback_source": "simulated", "simulated_ab": True},
    "outcomes_ab_without_exploration": {"feedback_source": "simulated", "simulated_ab": True, "exploration": 0.0},
}
OFF_PAIN_REPLY = 0.5  # P(reply | open) of an email that cites the fact; every other email gets none


def _off_pain_curve(args: tuple[str, int, int, str]) -> dict:
    """One run in which only emails citing `fact` get replies (the simulated provider's reply probability is replaced
    in this worker process); the share of the target's rollouts that cite it, per iteration."""
    variant, seed, iterations, fact = args
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ["WEAVE_DISABLED"] = "true"
    import app  # noqa: F401
    from app.outcomes import simulated
    from app.runs.schemas import LearnLoopRequest

    hidden = simulated.reply_probabilities

    def only_the_fact_gets_replies(email, prospect, preferences):
        p_open, _ = hidden(email, prospect, preferences)
        return p_open, OFF_PAIN_REPLY if fact in email.citations else 0.0

    simulated.reply_probabilities = only_the_fact_gets_replies
    request = LearnLoopRequest(iterations=iterations, rollouts_per_group=4, seed=seed, scenario_ids=[TARGET],
                               **OFF_PAIN_VARIANTS[variant])
    finished, records = asyncio.run(run_in_process(request, details=True))
    assert finished["status"] == "succeeded", finished
    share = [float(np.mean([bool(t["email"]) and fact in t["email"]["citations"] for t in r["trajectories"]]))
             for r in records[1:]]
    return {"variant": variant, "seed": seed, "share": share,
            "published": [bool(r["email"]) and fact in r["email"]["citations"] for r in records]}


def measure_off_pain(seeds=tuple(range(10)), iterations: int = 20) -> dict:
    """Only emails citing one off-pain fact get replies: that fact's share of late rollouts with outcomes (exploring,
    and not) against the same runs without outcomes."""
    fact = off_pain_fact()
    jobs = [(variant, seed, iterations, fact) for variant in OFF_PAIN_VARIANTS for seed in seeds]
    started = time.monotonic()
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        runs = list(pool.map(_off_pain_curve, jobs))
    late = {v: float(np.mean([np.mean(r["share"][LATE]) for r in runs if r["variant"] == v])) for v in OFF_PAIN_VARIANTS}
    return {
        "fact": fact, "seeds": list(seeds), "iterations": iterations, "seconds": round(time.monotonic() - started, 1),
        "late_share": late,
        "late_share_per_seed": {v: [round(float(np.mean(r["share"][LATE])), 3) for r in runs if r["variant"] == v]
                                for v in OFF_PAIN_VARIANTS},
        "published_citing": {v: float(np.mean([np.mean(r["published"][1:]) for r in runs if r["variant"] == v]))
                             for v in OFF_PAIN_VARIANTS},
        "curves": {v: np.mean([r["share"] for r in runs if r["variant"] == v], axis=0).round(3).tolist() for v in OFF_PAIN_VARIANTS},
    }


def measure(workdir: Path) -> dict:
    load = os.getloadavg()[0]
    return {"ingestion": measure_ingestion(workdir), "learning": measure_learning(), "off_pain": measure_off_pain(),
            "load_average_before": round(load, 2)}
