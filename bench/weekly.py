"""The weekly loop at a team's volume (issue 50): a team sends a week of drafts by the deployed policy, the outcomes
come back with their real delays, and each week's run continues the last one from what has arrived; does week 8 earn
more than week 1, and more than a rule with no learning?

One market of the world per seed (`SimulatedTeam(demo_graph(), market_seed=seed)`), and the promotion benchmark's
weekly line (`bench/promotion.py`, regret part) with no gate: a first run (`feedback_source: outcomes`, so the judge
alone: nothing was sent yet) is deployed; each week after, a run continued from the deployment (`init_from`,
`feedback_source: outcomes`: the graph's outcome model fitted on every outcome so far) is deployed in its place.
Everything goes through the API in process, with the drafts benchmark's helpers (`bench/drafts.py`).

Each week: the deployment drafts the team's new prospects (`POST /drafts`, at most 1,000 a batch), half look-alikes
of the demo's scenarios and half prospects from industries and roles no scenario has (`SimulatedTeam.unseen`); the
team sends a fifth of them each working morning (Monday to Friday, 09:00); the simulated SendGrid account reports what
happened up to the week's end (Sunday 24:00) through the providers' endpoints: a signed Event Webhook
(`POST /outcomes/hooks/{id}`) and each reply as RFC 822 (`…/inbound`), classified by the service. A reaction after the
week's end (replies come hours to ten days on, heavy-tailed) is reported at the end of the week it falls in. Then the
week's run learns from what has arrived.

The calendar lies in the past, ending an hour before the benchmark starts, so every timestamp is one a provider could
send. The service's clock is the real one: at each week's run it reads every send so far as past the reply window
(three days), so a Friday send (two days and fifteen hours old at the week's end) with no reply yet counts as not
replied to, where a service living those weeks would leave it out until Monday. That censoring falls alike on every
draft of a week (one policy wrote them all).

Measured per week, only here: the world's positive-reply probability (an interested or meeting reply, given delivery;
`Reader.positive_reply_probability`) of the week's drafts (a prospect the service wrote no email to, being suppressed,
counts 0), the realised rate (positive replies ÷ delivered, whenever they came), the share of the week's replies that
had arrived by its end, and the world's probability of the rule's (`bench/heuristic.py`) email to each of the same
prospects. Targets: week 8 ≥ 1.25× week 1, and above the rule, with 90 % intervals from resampling the seeds. Beside
them, on week 8's prospects (drafted, never sent): the untrained policy (`<first run>@0`) and week 1's deployment, which
learned nothing from any send, so week 8 over it is what the weeks of outcomes added on the same prospects.

`python -m bench weekly` (`WEEKLY_SEEDS`, `WEEKLY_WEEKS`, `WEEKLY_SENDS` change the sizes: 10 seeds, 8 weeks, 2,000
sends a week by default; with `WEEKLY_SEEDS_FILE=path` each finished seed is kept there, and a measurement stopped half
way goes on from it).
"""

import asyncio
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from app.drafts.schemas import MAX_PROSPECTS as MAX_BATCH
from bench.drafts import _environment, _ok, deploy, draft, learn, ratio_interval, service, true_replies
from bench.promotion import FIRST_ITERATIONS, WEEKLY_ITERATIONS
from bench.world import code_version, keep_seed, kept_seeds, mean_interval

SEEDS = 10
WEEKS = 8
SENDS = 2000  # a week: a team's volume
KINDS = ("look_alikes", "unseen")  # the team's prospects, half of each
WORKING_DAYS = 5  # the team sends a fifth of the week's drafts each morning, Monday to Friday
SEND_HOUR = 9
WEEK = timedelta(days=7)
MEASURED_CODE = ("app", "bench/weekly.py", "bench/heuristic.py", "bench/drafts.py", "bench/promotion.py")
WEBHOOK_BATCH = 1000  # sends per Event Webhook post
RISE_TARGET = 1.25  # week 8 over week 1


@dataclass(frozen=True)
class Sizes:
    seeds: int = SEEDS
    weeks: int = WEEKS
    sends: int = SENDS

    @classmethod
    def from_environment(cls) -> "Sizes":
        return cls(**{name: int(os.environ[f"WEEKLY_{name.upper()}"]) for name in cls.__dataclass_fields__
                      if f"WEEKLY_{name.upper()}" in os.environ})


def _prospects(team, seed: int, week: int, sends: int) -> list:
    """The week's new prospects: half look-alikes, half from unseen industries, each with an id of its own."""
    week_seed = seed * 100 + week
    look_alikes = team.look_alikes(sends - sends // 2, seed=week_seed)
    return look_alikes + team.unseen(sends // 2, seed=50_000 + week_seed)


async def _report(api, team, provider, source_id: str, sent: list, after: datetime | None, through: datetime) -> int:
    """What the provider posts about `sent` for (after, through] of the clock: its signed Event Webhook, then each reply
    that arrived; the events the service accepted."""
    accepted = 0
    for start in range(0, len(sent), WEBHOOK_BATCH):
        body, replies = team.as_provider(sent[start:start + WEBHOOK_BATCH], through=through, after=after)
        headers = provider.signed(body, int(datetime.now(UTC).timestamp()))
        got = await _ok(await api.http.post(f"/outcomes/hooks/{source_id}", content=body, headers=headers))
        assert got["unattributed"] == 0, got
        accepted += got["accepted"]
        for raw in replies:
            got = await _ok(await api.http.post(f"/outcomes/hooks/{source_id}/inbound", content=raw,
                                                headers={"Content-Type": "message/rfc822"}))
            assert got["unattributed"] == 0, got
            accepted += got["accepted"]
    return accepted


def _send(team, people: list, drafts: list[dict], seed: int, week_start: datetime) -> list:
    """The team sends a fifth of the drafts each working morning (none to a prospect the service wrote no email to)."""
    pairs = [(person, d["email"]) for person, d in zip(people, drafts, strict=True) if d["email"] is not None]
    share = -(-len(pairs) // WORKING_DAYS)
    sent = []
    for day in range(WORKING_DAYS):
        at = week_start + timedelta(days=day, hours=SEND_HOUR)
        sent += team.send(pairs[day * share:(day + 1) * share], seed=seed * 10 + day, sent_at=at)[0]
    return sent


async def _drafted(client, people: list, seed: int, policy: str) -> list[dict]:
    """`policy`'s drafts for the prospects, in batches of at most 1,000 (never sent)."""
    drafts = []
    for start in range(0, len(people), MAX_BATCH):
        drafts += (await draft(client, [p.prospect for p in people[start:start + MAX_BATCH]], seed=seed,
                               policy=policy))[1]
    return drafts


def _rule(graph, team, people: list) -> list[float]:
    """The world's positive-reply probability of the rule's email to each prospect."""
    from app.agent.schemas import Email
    from bench import heuristic

    out = []
    for person in people:
        written = heuristic.write(graph, person.prospect, person.person.goal)
        email = Email(subject=written.subject, body=written.body, citations=list(written.citations))
        out.append(team.probabilities(person, email)[1])
    return out


def _seed(args: tuple[int, Sizes]) -> dict:
    seed, sizes = args
    _environment()
    from app.knowledge_graph.service import demo_graph
    from app.outcomes.simulated import SimulatedSendGrid
    from app.outcomes.simulated_team import SimulatedTeam
    from app.simulation.kinds import POSITIVE

    graph = demo_graph()
    team, provider = SimulatedTeam(graph, market_seed=seed), SimulatedSendGrid()
    calendar = datetime.now(UTC) - sizes.weeks * WEEK - timedelta(hours=1)  # week 1's Monday 00:00; all in the past

    async def go() -> dict:
        with tempfile.TemporaryDirectory(prefix="codreamer-bench-") as data_dir:
            async with service(Path(data_dir)) as api:
                started = time.monotonic()
                source = await _ok(await api.http.post("/outcome-sources", json={
                    "provider": "sendgrid", "verification_key": provider.verification_key}), 201)
                first = await learn(api.http, {"iterations": FIRST_ITERATIONS, "rollouts_per_group": 4, "seed": seed,
                                               "feedback_source": "outcomes"})
                deployed = first_policy = (await deploy(api.http, f"{first['run_id']}@{FIRST_ITERATIONS}"))["policy"]
                every_send, weeks = [], []
                for week in range(1, sizes.weeks + 1):
                    clock, timings = time.monotonic(), {}
                    week_start = calendar + (week - 1) * WEEK
                    people = _prospects(team, seed, week, sizes.sends)
                    drafts = []
                    for start in range(0, len(people), MAX_BATCH):
                        batch, got = await draft(api.http, [p.prospect for p in people[start:start + MAX_BATCH]],
                                                 seed=seed * 100 + week)  # the deployment
                        assert batch["policy"] == deployed, (batch["policy"], deployed)
                        drafts += got
                    timings["draft"] = time.monotonic() - clock
                    sent = _send(team, people, drafts, seed * 100 + week, week_start)
                    every_send += sent
                    clock = time.monotonic()
                    accepted = await _report(api, team, provider, source["id"], every_send,
                                             after=week_start, through=week_start + WEEK)
                    timings["report"] = time.monotonic() - clock
                    clock = time.monotonic()
                    by_prospect = {s.prospect_id: s for s in sent}
                    world = [by_prospect[p.prospect["id"]].p_positive if p.prospect["id"] in by_prospect else 0.0
                             for p in people]
                    rule = _rule(graph, team, people)
                    timings["rule"] = time.monotonic() - clock
                    delivered = [s for s in sent if s.delivered]
                    replied = [s for s in delivered if s.replied]
                    kinds = np.array([KINDS[p.scenario_id == "unseen"] for p in people])
                    entry = {
                        "week": week, "policy": deployed, "world": float(np.mean(world)), "rule": float(np.mean(rule)),
                        "by_kind": {kind: {"world": float(np.mean(np.array(world)[kinds == kind])),
                                           "rule": float(np.mean(np.array(rule)[kinds == kind]))} for kind in KINDS},
                        "sent": len(sent), "no_email": len(people) - len(sent), "delivered": len(delivered),
                        "positive": sum(s.reply_kind in POSITIVE for s in delivered),
                        "realised": sum(s.reply_kind in POSITIVE for s in delivered) / max(1, len(delivered)),
                        "replies": len(replied),
                        "replies_by_week_end": sum(s.reaction.reply_at <= week_start + WEEK for s in replied),
                        "events_accepted": accepted,
                        "judge": float(np.mean([d["judge_score"] for d in drafts if d["judge_score"] is not None])),
                        "words": float(np.median([len(d["email"]["body"].split()) for d in drafts if d["email"]])),
                    }
                    if week == sizes.weeks:  # the same prospects by policies that learned nothing from the sends
                        clock = time.monotonic()
                        for name, policy in (("untrained", f"{first['run_id']}@0"), ("week_1_policy", first_policy)):
                            entry[name] = float(np.mean(true_replies(team, people, await _drafted(
                                api.http, people, seed * 100 + week, policy))))
                        timings["baselines"] = time.monotonic() - clock
                    if week < sizes.weeks:  # week 8's drafts are the last measured: no run after them
                        clock = time.monotonic()
                        run = await learn(api.http, {"iterations": WEEKLY_ITERATIONS, "rollouts_per_group": 4,
                                                     "seed": seed * 100 + week, "feedback_source": "outcomes",
                                                     "init_from": deployed})
                        assert run["config"]["init_from"] == deployed
                        deployed = (await deploy(api.http, f"{run['run_id']}@{WEEKLY_ITERATIONS}"))["policy"]
                        timings["learn"] = time.monotonic() - clock
                    entry["seconds"] = {k: round(v, 1) for k, v in timings.items()}
                    weeks.append(entry)
                    print(f"   weekly: seed {seed} week {week}: world {entry['world']:.4f}, rule {entry['rule']:.4f}, "
                          f"{entry['seconds']}", flush=True)
                return {"seed": seed, "weeks": weeks, "seconds": round(time.monotonic() - started, 1)}

    return asyncio.run(go())


def summary(per_seed: list[dict]) -> dict:
    """Per week, means over seeds; week 8 over week 1 and over the rule, with 90 % intervals from resampling seeds."""
    weeks = len(per_seed[0]["weeks"])

    def column(key: str, week: int) -> list[float]:
        return [s["weeks"][week][key] for s in per_seed]

    first, last, rule_last = column("world", 0), column("world", -1), column("rule", -1)
    untrained, week_1_policy = column("untrained", -1), column("week_1_policy", -1)
    return {
        "per_week": [{key: float(np.mean(column(key, w))) for key in ("world", "rule", "realised")}
                     | {"world_interval_90": mean_interval(column("world", w)),
                        "arrived_by_week_end": sum(column("replies_by_week_end", w))
                        / max(1, sum(column("replies", w))),
                        "by_kind": {kind: {k: float(np.mean([s["weeks"][w]["by_kind"][kind][k] for s in per_seed]))
                                           for k in ("world", "rule")}
                                    for kind in KINDS},
                        "judge": float(np.mean(column("judge", w))), "words": float(np.median(column("words", w))),
                        "no_email": int(sum(column("no_email", w)))}
                     for w in range(weeks)],
        "last_over_first": float(np.mean(last) / np.mean(first)),
        "last_over_first_interval_90": ratio_interval(last, first),
        "last_over_rule": float(np.mean(last) / np.mean(rule_last)),
        "last_over_rule_interval_90": ratio_interval(last, rule_last),
        "first_over_rule": float(np.mean(first) / np.mean(column("rule", 0))),
        "last_untrained": float(np.mean(untrained)),
        "last_over_untrained": float(np.mean(last) / np.mean(untrained)),
        "last_over_untrained_interval_90": ratio_interval(last, untrained),
        "last_week_1_policy": float(np.mean(week_1_policy)),
        "last_over_week_1_policy": float(np.mean(last) / np.mean(week_1_policy)),
        "last_over_week_1_policy_interval_90": ratio_interval(last, week_1_policy),
        "last_over_first_per_seed": [round(b / a, 3) for a, b in zip(first, last, strict=True)],
    }


def measure(sizes: Sizes | None = None, workers: int = 2) -> dict:
    from bench import commit

    sizes = sizes or Sizes.from_environment()
    path = Path(os.environ["WEEKLY_SEEDS_FILE"]) if os.environ.get("WEEKLY_SEEDS_FILE") else None
    config = {"code": code_version(MEASURED_CODE), "sizes": {k: v for k, v in sizes.__dict__.items() if k != "seeds"}}
    kept = kept_seeds(path, config)
    todo = [seed for seed in range(sizes.seeds) if seed not in kept]
    started = time.monotonic()
    load = [round(x, 2) for x in os.getloadavg()]
    with ProcessPoolExecutor(workers) as pool:
        for done in as_completed([pool.submit(_seed, (seed, sizes)) for seed in todo]):
            result = done.result() | {"commit": commit()}
            kept[result["seed"]] = result
            keep_seed(path, config, result)
    per_seed = [kept[seed] for seed in range(sizes.seeds)]
    return {"sizes": sizes.__dict__, "first_iterations": FIRST_ITERATIONS, "weekly_iterations": WEEKLY_ITERATIONS,
            "seconds": round(time.monotonic() - started, 1), "resumed_seeds": sorted(set(range(sizes.seeds)) - set(todo)),
            "load_average_before": load, "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "workers": workers, "per_seed": per_seed, **summary(per_seed)}
