"""Promotion on evidence (issues 41 and 50): how accurate the off-policy estimates are, and what gating a promotion
costs or saves, on the demo's simulated team (`app.outcomes.simulated_team`) in the simulated world, whose readers
reply a few per cent.

Everything goes through the API in process, with the drafts benchmark's helpers (`bench.drafts`): `POST /learn-loop`,
`PUT /graphs/demo/deployment` (a champion and challengers with their shares, `require_evidence`), `POST /drafts` (each
draft logs the policy drawn for it and its propensity), `POST /outcomes` (the simulated sends, dated a reply window
back so that they count), `POST /evaluations` (whose `off_policy` this reads). The world's positive-reply probability
of a draft (`app.simulation`) is read only here.

- OPE accuracy: per seed, a run; its untrained policy (`@0`) is the champion and its last the challenger, at a
  90/10 split. One stream of look-alikes is drafted by the deployment, in batches of at most 1,000 (what `POST /drafts`
  takes), each batch sent as drafted; after 400, 1,000 and 4,000 logged sends an evaluation (with held-out look-alikes
  for the doubly robust estimate's direct method) estimates each policy's reply rate from every send so far. Every
  batch has as many look-alikes of each scenario. The true value of a policy is its mean true reply probability over
  such a population, each scenario weighted alike, measured on the first batch: its own drafts where it was drawn, and
  for the others a batch it drafts alone (never sent); a policy writes nearly the same email to every look-alike of a
  scenario, so the sample's standard error is small (reported). Per volume and estimator: the share of seeds within
  ±0.03 of the true value, the bias (mean error), the spread (standard deviation of the error), the mean width of the
  90 % intervals and the share that hold the true value. A projection then replays the logging (90/10 draws, replies
  drawn from the same true probabilities) with the service's own estimators (`app.stats.estimators`), with DR
  given each prospect's true probability as its direct method: the most any outcome model could give DR.
- Regret: per seed, a first run is deployed (the judge alone: nothing was sent yet). Each week a new challenger
  arrives, a run continued (`init_from`) from the previous week's challenger, learning from every outcome so far (the
  team's training line; week 1's continues the first policy), and a week's new look-alikes are drafted (a team's 2,000,
  in lists of at most 1,000: `week_look_alikes`). Where each challenger on that line is at least as good as the one
  before, always-promote is close to the best any strategy can do (the section says how often it was); the parts
  `regret_regressing` and `regret_regressing_auto` make every third week's challenger (weeks 3 and 6 of 8: issue 50's
  "a third of challengers worse") a teammate's run that did not continue the line instead (5 iterations from scratch
  on the judge alone, `feedback_source: none`), and the line goes on from its own last policy the week after;
  `regret_regressing_auto_sequential` is the last with a `sequential` deployment. Three strategies meet
  the same challengers and the same prospects:
  * gated: the deployment requires evidence; the week's challenger joins it at a share of 0.1 (part `regret`), or
    with `auto` traffic (part `regret_auto`: top-two Thompson sampling, a new challenger at an even share until it has
    a week's even share of mature sends), up to three challengers (the oldest leaves); the batch is drafted by the deployment and sent, an evaluation compares every
    deployed policy, and a challenger is promoted when `PUT` accepts it (the evaluation's interval puts it ahead;
    otherwise the service answers 409). The champion it replaces stays as a challenger, so a rollback can be earned.
  * always-promote: the week's challenger writes every email of the week.
  * never-promote: the first policy writes every email of every week.
  A strategy's total is the sum over the weeks of the true reply probabilities of its drafts (a prospect with no
  email counts 0). A policy's quality is the mean true reply probability of the emails it wrote to its week's
  prospects (the first policy's: over every week), and a week counts as "a worse policy deployed" when the gated
  champion's quality is below that of the champion it replaced.
- Peeking (`peeking`, not through the API): how often the gate's own rule, asked after every week, promotes a
  challenger better than the champion, as good or worse, over replays of the weekly sends, with the fixed-sample and
  the always-valid (`sequential`) interval.
- Replay (`replay`, not through the API): the regret loop with `auto` traffic replayed by the service's own traffic,
  estimator and gate, at the true reply rates the regret parts measured, for weekly volumes and chances that a week's
  challenger did not continue the line: where the gated loop sends at least as many replies as always-promote.
"""

import asyncio
import math
import os
import tempfile
import time
from pathlib import Path
from statistics import NormalDist

import numpy as np

from app.drafts.schemas import MAX_PROSPECTS as MAX_BATCH
from bench import commit, machine
from bench.drafts import GRAPH, _environment, _ok, draft, learn, send, service, true_replies
from bench.world import code_version, keep_seed, kept_seeds

ESTIMATORS = ("ips", "snips", "dr")
TOLERANCE = 0.03  # the target: within ±0.03 of the true value
TARGET_SHARE = 0.8  # … in at least 80 % of seeds


# ---------------------------------------------------------------- pure helpers (tests/unit/test_bench_promotion.py)


def accuracy(estimates: list[dict | None], truths: list[float], tolerance: float = TOLERANCE) -> dict:
    """Of estimates `{"value", "low", "high"}` (None: the evaluation gave none) against the true values: the share of
    seeds within ±tolerance (a missing estimate is not within), the bias (mean error), the spread (the error's standard
    deviation), the root mean squared error, and the share of 90 % intervals that hold the true value."""
    pairs = [(e, t) for e, t in zip(estimates, truths, strict=True) if e is not None]
    errors = np.array([e["value"] - t for e, t in pairs])
    if not pairs:
        return {"within": 0.0, "bias": None, "spread": None, "rmse": None, "coverage": None, "missing": len(truths)}
    return {"within": float((np.abs(errors) <= tolerance + 1e-12).sum() / len(truths)),
            "bias": float(errors.mean()), "spread": float(errors.std(ddof=1)) if len(errors) > 1 else 0.0,
            "rmse": float(math.sqrt((errors**2).mean())),
            "coverage": float(np.mean([e["low"] <= t <= e["high"] for e, t in pairs])), "missing": len(truths) - len(pairs)}


def sends_needed(p: float, share: float, tolerance: float = TOLERANCE, within: float = TARGET_SHARE) -> int:
    """Logged sends (all arms) after which the mean reply of a policy drawn with probability `share`, true rate `p`,
    is within ±tolerance with probability `within` (the binomial noise alone: what SNIPS is, on its own sends)."""
    z = NormalDist().inv_cdf((1 + within) / 2)
    return math.ceil((z / tolerance) ** 2 * p * (1 - p) / share)


def project(champion: np.ndarray, challenger: np.ndarray, share: float, sends: int, repeats: int, seed: int,
            tolerance: float = TOLERANCE) -> dict:
    """The logging replayed `repeats` times at `sends` sends: prospects drawn from the truth sample (each policy's
    true reply probability for them), the challenger drawn with probability `share`, a reply drawn from the drawn
    policy's probability; the challenger's estimates by `app.stats.estimators` against the sample's true value.
    Per estimator, the share of repeats within ±tolerance: IPS, SNIPS, and `dr_perfect`, DR with the true probability
    of each prospect as its direct method: what DR gives with an outcome model that knew every prospect's rate
    exactly, the most any direct method can give (there is no outcome model here)."""
    from app.stats.estimators import off_policy

    rng = np.random.default_rng(seed)
    truth = float(challenger.mean())
    within = {name: 0 for name in ("ips", "snips", "dr_perfect")}
    for _ in range(repeats):
        who = rng.integers(0, len(challenger), size=sends)
        arms = (rng.random(sends) < share).astype(int)
        rewards = (rng.random(sends) < np.where(arms == 1, challenger[who], champion[who])).astype(float)
        propensities = np.where(arms == 1, share, 1 - share)
        found = off_policy(arms, propensities, rewards, 1, challenger[who])
        for name, estimate in (("ips", found.ips), ("snips", found.snips), ("dr_perfect", found.dr)):
            within[name] += estimate is not None and abs(estimate.value - truth) <= tolerance + 1e-12
    return {name: count / repeats for name, count in within.items()}


def ahead(mine, theirs, sends: int | None = None) -> bool:
    """The gate's rule (`app.stats.intervals.compared`) on two estimates of `app.stats.estimators`: the 90 %
    interval of their difference lies above zero (given the `sends` both rest on, the always-valid interval)."""
    from app.stats.intervals import compared

    difference, margin = compared(mine, theirs, sends=sends)
    return difference - margin > 0


def peeking(p: float, share: float, weekly_sends: int, weeks: int, repeats: int, seed: int,
            gap: float = 0.0, sequential: bool = False) -> list[float]:
    """How often the gate (`app.stats.intervals.compared`, on SNIPS from `app.stats.estimators`; with
    `sequential`, its always-valid interval) puts a challenger ahead when it looks every week: per week, the share of
    `repeats` in which some look so far cleared zero. Each week `weekly_sends` more sends, the challenger drawn with
    probability `share`; a reply is drawn with probability `p` for the champion's emails, `p + gap` for the
    challenger's."""
    from app.stats.estimators import off_policy

    rng = np.random.default_rng(seed)
    promoted_by = np.zeros(weeks)
    for _ in range(repeats):
        arms = (rng.random(weeks * weekly_sends) < share).astype(int)
        rewards = (rng.random(weeks * weekly_sends) < np.where(arms == 1, p + gap, p)).astype(float)
        propensities = np.where(arms == 1, share, 1 - share)
        for week in range(1, weeks + 1):
            n = week * weekly_sends
            mine, theirs = (off_policy(arms[:n], propensities[:n], rewards[:n], arm, None).snips for arm in (1, 0))
            if mine is not None and theirs is not None:
                if ahead(mine, theirs, sends=n if sequential else None):
                    promoted_by[week - 1:] += 1
                    break
    return [float(x / repeats) for x in promoted_by]


def replay_regret(line: list[float], first: float, regressed: float, rate: float | tuple[int, ...], weekly: int,
                  repeats: int, seed: int, *, max_challengers: int, floor: float, sequential: bool = False) -> dict:
    """The regret parts' weekly loop replayed with the service's own rules and no model, `repeats` times: where the
    gated loop with `auto` traffic beats always-promote. A week's challenger writes every email at its true reply rate:
    the line's `line[week]`, or `regressed` for a challenger that did not continue it (each week with probability
    `rate`, or in the weeks a tuple names, 1-based); the first policy, `first`, is the first champion. Each week: the
    challenger joins (up to `max_challengers`, the oldest leaves), `weekly` drafts are drawn at the shares of
    `app.stats.bandit.auto_shares` (a new challenger's even share lasts until it has a week's even share of sends),
    a reply is drawn for each, then every deployed policy's SNIPS estimate (`app.stats.estimators`) from every
    send so far is compared with the champion's by the gate's rule (`app.stats.intervals.compared`; with
    `sequential`, its always-valid interval), best estimate first; a promoted challenger's old champion stays as a
    challenger. Totals are expected replies (the true rates of the drafts), as in the regret parts. Per strategy: the
    mean total; the gated loop's mean difference from always-promote with its standard error, and the share of replays
    in which it is at least as large; the share of replays in which a policy worse than the champion it replaced was
    deployed, the longest such stretch in weeks and the largest such gap in true reply rate (`worse_deployed`, as in the
    regret parts)."""
    from app.stats.bandit import auto_shares
    from app.stats.estimators import off_policy

    rng = np.random.default_rng(seed)
    min_sends = weekly // (1 + max_challengers)
    totals = {"gated": [], "always": [], "never": []}
    worse_replays, longest_worse, largest_gap, promotions = 0, 0, 0.0, 0
    for _ in range(repeats):
        quality = [first]  # by policy: its true reply rate
        champion, challengers = 0, []
        policies, rewards, batches = np.empty(0, int), np.empty(0), np.empty(0, int)  # per send so far
        shares_by_batch: list[dict[int, float]] = []
        gated, champions = 0.0, []
        for week in range(len(line)):
            champions.append(champion)
            regress = week + 1 in rate if isinstance(rate, tuple) else rng.random() < rate
            quality.append(regressed if regress else line[week])
            challengers = (challengers + [len(quality) - 1])[-max_challengers:]
            arms = [champion, *challengers]
            seen = [(int((policies == a).sum()), int(rewards[policies == a].sum())) for a in arms]
            shares = auto_shares(seen, floor=floor, min_sends=min_sends, seed=int(rng.integers(2**31)))
            drawn = np.asarray(arms)[rng.choice(len(arms), size=weekly, p=np.asarray(shares) / sum(shares))]
            rates = np.asarray(quality)[drawn]
            gated += float(rates.sum())
            shares_by_batch.append(dict(zip(arms, shares, strict=True)))
            policies = np.concatenate([policies, drawn])
            rewards = np.concatenate([rewards, (rng.random(weekly) < rates).astype(float)])
            batches = np.concatenate([batches, np.full(weekly, week)])
            estimates = {}
            for a in arms:  # its sends in the batches it had a share of, at its share there
                rows = np.isin(batches, [b for b, s in enumerate(shares_by_batch) if a in s])
                share_of = np.asarray([shares_by_batch[b][a] for b in batches[rows]])
                estimates[a] = off_policy((policies[rows] == a).astype(int), share_of, rewards[rows], 1, None).snips
            better = sorted((c for c in challengers if estimates[c] is not None and estimates[champion] is not None
                            and estimates[c].value > estimates[champion].value), key=lambda c: -estimates[c].value)
            for candidate in better:
                sends = int(np.isin(policies, [candidate, champion]).sum()) if sequential else None
                if ahead(estimates[candidate], estimates[champion], sends=sends):
                    promotions += 1
                    rest = [c for c in challengers if c != candidate] + [champion]
                    champion, challengers = candidate, rest[-max_challengers:]
                    break
        worse = worse_deployed(champions, dict(enumerate(quality)))
        worse_replays += bool(worse)
        longest_worse = max([longest_worse, *(stretch["weeks"] for stretch in worse)])
        largest_gap = max([largest_gap, *(quality[stretch["replaced"]] - quality[stretch["policy"]] for stretch in worse)])
        totals["gated"].append(gated)
        totals["always"].append(weekly * float(sum(quality[1:])))
        totals["never"].append(weekly * first * len(line))
    difference = np.asarray(totals["gated"]) - np.asarray(totals["always"])
    return {"totals": {name: float(np.mean(values)) for name, values in totals.items()},
            "gated_minus_always": float(difference.mean()),
            "gated_minus_always_se": float(difference.std(ddof=1) / math.sqrt(repeats)) if repeats > 1 else 0.0,
            "gated_at_least_always": float((difference >= 0).mean()),
            "promotions": promotions / repeats, "worse_deployed": worse_replays / repeats, "largest_worse_gap": largest_gap,
            "longest_worse_weeks": longest_worse}


def written_by(drafts: list[dict], policy: str, extra: list[dict]) -> list[dict]:
    """Each prospect's draft by `policy`: its own among `drafts` (where it was drawn), and in prospect order for the
    others the drafts of `extra` (a batch it wrote alone for them)."""
    out, others = list(drafts), iter(extra)
    for index, d in enumerate(drafts):
        if d["policy"] != policy:
            out[index] = next(others)
            assert out[index]["prospect"]["id"] == d["prospect"]["id"], (out[index]["prospect"]["id"], d["prospect"]["id"])
    assert next(others, None) is None, "more drafts than prospects another policy drafted"
    return out


def estimate_of(report: dict) -> dict | None:
    """The estimate the evidence rule reads (`app.policies.evidence`): doubly robust where there is one, else SNIPS."""
    off = report["off_policy"]
    return off["dr"] or off["snips"]


def promotion_order(result: dict, champion: str, challengers: list[str]) -> list[str]:
    """The challengers whose estimate is above the champion's, best first: those worth asking `PUT` to promote."""
    found = {p["policy"]: estimate_of(p) for p in result["policies"]}
    if found.get(champion) is None:
        return []
    ahead = [c for c in challengers if found.get(c) is not None and found[c]["value"] > found[champion]["value"]]
    return sorted(ahead, key=lambda c: -found[c]["value"])


def worse_deployed(champions: list[str], quality: dict[str, float]) -> list[dict]:
    """Each stretch of weeks (1-based) in which the champion was a policy whose quality is below that of the champion
    it replaced: `{"policy", "replaced", "from_week", "weeks"}`."""
    stretches, previous = [], None
    for week, (before, now) in enumerate(zip([None, *champions], champions), start=1):
        if now != before:
            previous = before
            if previous is not None and quality[now] < quality[previous]:
                stretches.append({"policy": now, "replaced": previous, "from_week": week, "weeks": 0})
        if stretches and stretches[-1]["policy"] == now and stretches[-1]["from_week"] + stretches[-1]["weeks"] == week:
            stretches[-1]["weeks"] += 1
    return stretches


# ---------------------------------------------------------------- API helpers


async def deploy_arms(client, champion: str, challengers: list[str], share: float | None, **options):
    """PUT the deployment: the champion and each challenger at `share` (None: `traffic` "auto" in `options` computes
    them); the answer as it came (a 409 is the gate)."""
    return await client.put(f"/graphs/{GRAPH}/deployment", json={
        "policy": champion, "challengers": [{"policy": c} | ({} if share is None else {"share": share}) for c in challengers],
        **options})


async def evaluate(client, policies: list[str], prospects: list[dict], poll_s: float = 0.2) -> dict:
    """POST /evaluations, then its result once it succeeded."""
    created = await _ok(await client.post("/evaluations", json={"graph_id": GRAPH, "policies": policies,
                                                               "prospects": prospects}), 202)
    while True:
        evaluation = await _ok(await client.get(created["links"]["self"]))
        if evaluation["status"] in ("succeeded", "failed"):
            assert evaluation["status"] == "succeeded", evaluation
            return evaluation["result"]
        await asyncio.sleep(poll_s)


async def draft_all(client, prospects: list[dict], seed: int, policy: str | None = None) -> tuple[list[dict], list[dict]]:
    """`bench.drafts.draft` in batches of at most what `POST /drafts` takes: the batches and every draft, in
    prospect order (a draw depends on the prospect, not on its batch)."""
    batches_, drafts = [], []
    for start in range(0, len(prospects), MAX_BATCH):
        batch, written = await draft(client, prospects[start:start + MAX_BATCH], seed=seed, policy=policy)
        batches_.append(batch)
        drafts += written
    return batches_, drafts


async def by_policy(client, look_alikes, drafts: list[dict], policy: str, seed: int) -> list[dict]:
    """Each prospect's email by `policy`: where the batch drew it, that draft; the others drafted by it now, not sent."""
    missing = [look_alikes[i].prospect for i, d in enumerate(drafts) if d["policy"] != policy]
    extra = (await draft_all(client, missing, seed=seed, policy=policy))[1] if missing else []
    return written_by(drafts, policy, extra)


def _interval(estimate: dict | None) -> dict | None:
    return None if estimate is None else {k: round(estimate[k], 4) for k in ("value", "low", "high")}


# ---------------------------------------------------------------- OPE accuracy

OPE_SEEDS = 10
OPE_VOLUMES = (400, 1000, 4000)  # logged sends per seed at which the evaluation is read (nested: one stream of sends)
OPE_ITERATIONS = 5  # the run whose last policy is the challenger
OPE_SHARE = 0.1  # the challenger's: champion-heavy traffic, 90/10
HELD_OUT = 20  # look-alikes for an evaluation's held-out part (2 of each scenario): the DR estimate's direct method
PROJECTED_SENDS = (400, 1000, 2000, 4000, 8000)
PROJECTION_REPEATS = 400


def batches(volumes: tuple[int, ...], largest: int = MAX_BATCH) -> list[list[int]]:
    """Per volume, the sizes of the batches that take the stream of sends from the previous volume to it, none over
    `largest` (what `POST /drafts` takes at once)."""
    out, reached = [], 0
    for volume in volumes:
        sizes = []
        while reached < volume:
            sizes.append(min(largest, volume - reached))
            reached += sizes[-1]
        out.append(sizes)
    return out


def stratified_truth(values: list[float], strata: list[str]) -> tuple[float, float]:
    """The mean over strata (scenarios) of each stratum's mean, and its standard error: a policy's value over a
    population with as many prospects of each scenario, from a sample that has as many of each too."""
    groups: dict[str, list[float]] = {}
    for value, stratum in zip(values, strata, strict=True):
        groups.setdefault(stratum, []).append(value)
    k = len(groups)
    means = [float(np.mean(v)) for v in groups.values()]
    variances = [float(np.var(v, ddof=1)) / len(v) if len(v) > 1 else 0.0 for v in groups.values()]
    return float(np.mean(means)), float(math.sqrt(sum(variances)) / k)


def _ope_seed(args: tuple[int, tuple[int, ...], int, float, int]) -> dict:
    seed, volumes, iterations, share, held_out = args
    _environment()
    from app.knowledge_graph.service import demo_graph
    from app.outcomes.simulated_team import SimulatedTeam

    team = SimulatedTeam(demo_graph())

    async def go() -> dict:
        with tempfile.TemporaryDirectory(prefix="codreamer-bench-") as data_dir:
            async with service(Path(data_dir)) as api:
                started, load = time.monotonic(), os.getloadavg()[0]
                run = await learn(api.http, {"iterations": iterations, "rollouts_per_group": 4, "seed": seed,
                                             "feedback_source": "oracle"})
                champion, challenger = f"{run['run_id']}@0", f"{run['run_id']}@{iterations}"
                roles = (("champion", champion), ("challenger", challenger))
                await _ok(await deploy_arms(api.http, champion, [challenger], share))
                held = [la.prospect for la in team.look_alikes(held_out, seed=40_000 + seed)]
                timings = {"learn": time.monotonic() - started, "draft": 0.0, "send": 0.0, "truth": 0.0}
                truth, probabilities, at, batch_number, drawn = None, {}, [], 0, 0
                for volume, sizes in zip(volumes, batches(volumes), strict=True):
                    for size in sizes:
                        look_alikes = team.look_alikes(size, seed=30_000 + 100 * seed + batch_number)
                        clock = time.monotonic()
                        _, logged = await draft(api.http, [la.prospect for la in look_alikes], seed=seed)  # the deployment
                        timings["draft"] += time.monotonic() - clock
                        assert {(d["policy"], d["propensity"]) for d in logged} <= {(champion, 1 - share), (challenger, share)}
                        drawn += sum(d["policy"] == challenger for d in logged)
                        clock = time.monotonic()
                        await send(api, team, look_alikes, logged, seed=30_000 + 100 * seed + batch_number)
                        timings["send"] += time.monotonic() - clock
                        if truth is None:  # the first batch is the truth sample: every prospect, by each policy
                            clock = time.monotonic()
                            strata = [la.scenario_id for la in look_alikes]
                            truth, truth_se = {}, {}
                            for role, policy in roles:
                                written = await by_policy(api.http, look_alikes, logged, policy, seed=seed)
                                probabilities[role] = true_replies(team, look_alikes, written)
                                truth[role], truth_se[role] = stratified_truth(probabilities[role], strata)
                            timings["truth"] = time.monotonic() - clock
                        batch_number += 1
                    clock = time.monotonic()
                    result = await evaluate(api.http, [challenger, champion], held)
                    evaluated_s = time.monotonic() - clock
                    reports = {p["policy"]: p for p in result["policies"]}
                    off = reports[challenger]["off_policy"]
                    at.append({"volume": volume, "drawn": drawn, "n": off["n"], "matched": off["matched"],
                               "ess": round(off["ess"], 1), "evaluation_s": round(evaluated_s, 1),
                               "predicted_reply": _interval(reports[challenger]["predicted_reply"]),
                               "estimates": {role: {name: _interval(reports[policy]["off_policy"][name]) for name in ESTIMATORS}
                                             for role, policy in roles}})
                return {"seed": seed, "truth": truth, "truth_se": truth_se, "volumes": at,
                        "probabilities": {role: [round(p, 5) for p in ps] for role, ps in probabilities.items()},
                        "timings": {k: round(v, 1) for k, v in timings.items()},
                        "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
                        "seconds": round(time.monotonic() - started, 1)}

    return asyncio.run(go())


def measure_ope(seeds: int = OPE_SEEDS, volumes: tuple[int, ...] = OPE_VOLUMES, iterations: int = OPE_ITERATIONS,
                share: float = OPE_SHARE, held_out: int = HELD_OUT, workers: int = 2) -> dict:
    from concurrent.futures import ProcessPoolExecutor, as_completed

    started, load = time.monotonic(), os.getloadavg()
    config = {"volumes": list(volumes), "iterations": iterations, "share": share, "held_out": held_out}
    kept = kept_seeds(_seeds_file(), config)  # seeds a stopped measurement finished (OPE_SEEDS_FILE), not measured again
    todo = [(s, volumes, iterations, share, held_out) for s in range(seeds) if s not in kept]
    with ProcessPoolExecutor(workers) as pool:
        for future in as_completed([pool.submit(_ope_seed, args) for args in todo]):
            finished = future.result()
            kept[finished["seed"]] = finished
            keep_seed(_seeds_file(), config, finished)
    return summarize_ope([kept[s] for s in range(seeds)], volumes, iterations, share, held_out) | {
        "resumed_seeds": sorted(set(range(seeds)) - {t[0] for t in todo}), "workers": workers,
        "seconds": round(time.monotonic() - started, 1), "load_average_before": [round(x, 2) for x in load],
        "load_average_after": [round(x, 2) for x in os.getloadavg()]}


def summarize_ope(runs: list[dict], volumes: tuple[int, ...], iterations: int, share: float, held_out: int) -> dict:
    """The seeds' figures per volume and estimator, and the projection."""
    seeds = len(runs)
    by_volume = []
    for index, volume in enumerate(volumes):
        at = [r["volumes"][index] for r in runs]
        roles = {}
        for role in ("challenger", "champion"):
            truths = [r["truth"][role] for r in runs]
            roles[role] = {"truth": float(np.mean(truths)), "estimators": {
                name: accuracy([a["estimates"][role][name] for a in at], truths)
                | {"width": _mean_width([a["estimates"][role][name] for a in at])} for name in ESTIMATORS}}
        p = roles["challenger"]["truth"]
        matched = float(np.mean([a["matched"] for a in at]))
        by_volume.append({"volume": volume, "roles": roles, "matched": [a["matched"] for a in at], "logged": [a["n"] for a in at],
                          "ess": float(np.mean([a["ess"] for a in at])),
                          "binomial_spread": float(np.sqrt(p * (1 - p) / matched)),
                          "evaluation_s": float(np.mean([a["evaluation_s"] for a in at])),
                          "evaluation_s_max": float(np.max([a["evaluation_s"] for a in at]))})
    p = float(np.mean([r["truth"]["challenger"] for r in runs]))
    projection = {}
    for n in PROJECTED_SENDS:
        shares = [project(np.array(r["probabilities"]["champion"]), np.array(r["probabilities"]["challenger"]),
                          share, n, PROJECTION_REPEATS, seed=1000 * r["seed"] + n) for r in runs]
        projection[str(n)] = {name: float(np.mean([s[name] for s in shares])) for name in shares[0]}
    return {
        "seeds": seeds, "volumes": list(volumes), "batches": batches(volumes), "iterations": iterations, "share": share,
        "held_out": held_out, "tolerance": TOLERANCE, "by_volume": by_volume,
        "truth_sample": volumes[0], "truth_se": float(np.mean([r["truth_se"]["challenger"] for r in runs])),
        "sends_needed": sends_needed(p, share), "projection": projection, "projection_repeats": PROJECTION_REPEATS,
        "per_seed": [{k: r[k] for k in ("seed", "truth", "truth_se", "volumes", "timings", "load_average", "seconds") if k in r}
                     for r in runs],
    }


def _seeds_file() -> Path | None:
    path = os.environ.get("OPE_SEEDS_FILE")
    return Path(path) if path else None


def _mean_width(estimates: list[dict | None]) -> float | None:
    """The mean width of the 90 % intervals (high − low) of the estimates there are."""
    widths = [e["high"] - e["low"] for e in estimates if e is not None]
    return float(np.mean(widths)) if widths else None


# ---------------------------------------------------------------- regret over weeks

# Issue 50's sizes: a team's 2,000 sends a week for 8 weeks, 10 seeds. Each can be set smaller from the environment
# (PROMOTION_WEEKS, PROMOTION_WEEKLY_PROSPECTS, PROMOTION_SEEDS) for a run that fits a smaller machine; the section
# then says which sizes were below these.
TARGET_WEEKS, TARGET_WEEKLY_PROSPECTS, TARGET_SEEDS = 8, 2_000, 10
WEEKS = int(os.environ.get("PROMOTION_WEEKS", TARGET_WEEKS))
WEEKLY_PROSPECTS = int(os.environ.get("PROMOTION_WEEKLY_PROSPECTS", TARGET_WEEKLY_PROSPECTS))
REGRET_SEEDS = int(os.environ.get("PROMOTION_SEEDS", TARGET_SEEDS))
FIRST_ITERATIONS = 5
WEEKLY_ITERATIONS = 5
CHALLENGER_SHARE = 0.1
MAX_CHALLENGERS = 3
AUTO_FLOOR = 0.01  # the deployment's default
# `auto` traffic: a new challenger drafts an even share until it has a week's even share of mature sends (a week's
# prospects among a champion and three challengers), then top-two Thompson sampling moves its traffic
AUTO_MIN_SENDS = WEEKLY_PROSPECTS // (1 + MAX_CHALLENGERS)
REGRESS_EVERY = 3  # on the regressing line, every third week's challenger is a run that did not continue the line


def week_look_alikes(team, count: int, seed: int) -> list:
    """A week's `count` look-alikes, in groups of at most `MAX_BATCH` of their own seeds (the first group's is `seed`):
    the world names at most about a thousand distinct people at once, and a team's week is several lists."""
    return [la for group, start in enumerate(range(0, count, MAX_BATCH))
            for la in team.look_alikes(min(MAX_BATCH, count - start), seed=seed + 100_000 * group)]


def regressed_weeks(weeks: int, every: int | None) -> list[int]:
    """The weeks (1-based) whose challenger does not continue the line: every `every`-th (None: none)."""
    return [] if every is None else list(range(every, weeks + 1, every))


def _regret_seed(args: tuple) -> dict:
    (seed, weeks, prospects_n, first_iterations, weekly_iterations, traffic, max_challengers, held_out, regressed,
     sequential) = args
    share = traffic.get("share")
    options = {} if share is not None else {"traffic": "auto", "floor": traffic["floor"], "min_sends": traffic["min_sends"]}
    options |= {"sequential": True} if sequential else {}
    _environment()
    from app.knowledge_graph.service import demo_graph
    from app.outcomes.simulated_team import SimulatedTeam

    team = SimulatedTeam(demo_graph())

    async def go() -> dict:
        with tempfile.TemporaryDirectory(prefix="codreamer-bench-") as data_dir:
            async with service(Path(data_dir)) as api:
                started = time.monotonic()
                first = await learn(api.http, {"iterations": first_iterations, "rollouts_per_group": 4, "seed": seed,
                                               "feedback_source": "outcomes"})
                never = f"{first['run_id']}@{first_iterations}"
                await _ok(await deploy_arms(api.http, never, [], share, require_evidence=True, **options))
                champion, challengers, line, out = never, [], never, []
                for week in range(1, weeks + 1):
                    week_started, week_seed = time.monotonic(), seed * 100 + week
                    config = {"iterations": weekly_iterations, "rollouts_per_group": 4, "seed": week_seed}
                    if week in regressed:  # a teammate's run from scratch, on the judge alone
                        run = await learn(api.http, config | {"feedback_source": "none"})
                        new = f"{run['run_id']}@{weekly_iterations}"
                    else:
                        run = await learn(api.http, config | {"feedback_source": "outcomes", "init_from": line})
                        new = line = f"{run['run_id']}@{weekly_iterations}"
                    challengers = (challengers + [new])[-max_challengers:]
                    deployed = await _ok(await deploy_arms(api.http, champion, challengers, share, **options))
                    look_alikes = week_look_alikes(team, prospects_n, seed=week_seed)
                    drafted, gated = await draft_all(api.http, [la.prospect for la in look_alikes], seed=week_seed)
                    assert {b["policy"] for b in drafted} == {champion} and champion == deployed["policy"], champion
                    sent = await send(api, team, look_alikes, gated, seed=week_seed)
                    always = await by_policy(api.http, look_alikes, gated, new, seed=week_seed)
                    kept = await by_policy(api.http, look_alikes, gated, never, seed=week_seed)
                    entry = {"week": week, "champion": champion, "challengers": list(challengers), "new": new,
                             "regressed": week in regressed,
                             "drawn": {p: sum(d["policy"] == p for d in gated) for p in [champion, *challengers]},
                             "gated": float(np.sum(true_replies(team, look_alikes, gated))),
                             "always": float(np.sum(true_replies(team, look_alikes, always))),
                             "never": float(np.sum(true_replies(team, look_alikes, kept))), **sent}
                    # the evidence: every deployed policy, from every mature send so far
                    held = [la.prospect for la in team.look_alikes(held_out, seed=50_000 + week_seed)]
                    result = await evaluate(api.http, [champion, *challengers], held)
                    entry["evidence"] = {p["policy"]: {"matched": p["off_policy"]["matched"],
                                                       "estimate": _interval(estimate_of(p))} for p in result["policies"]}
                    entry["promoted"], entry["refused"] = None, []
                    for candidate in promotion_order(result, champion, challengers):
                        rest = [c for c in challengers if c != candidate] + [champion]  # the old champion can win it back
                        answer = await deploy_arms(api.http, candidate, rest[-max_challengers:], share, **options)
                        if answer.status_code == 409:
                            entry["refused"].append(candidate)
                            continue
                        await _ok(answer)
                        entry["promoted"], champion, challengers = candidate, candidate, rest[-max_challengers:]
                        break
                    entry["seconds"] = round(time.monotonic() - week_started, 1)
                    print(f"   seed {seed}, week {week}: {entry['seconds']:.0f} s, {sent['replied']} replies of "
                          f"{sent['sent']} sends, promoted {entry['promoted']}", flush=True)
                    out.append(entry)
                return {"seed": seed, "never": never, "weeks": out, "seconds": round(time.monotonic() - started, 1)}

    return asyncio.run(go())


def _summary(run: dict, prospects_n: int) -> dict:
    """Totals per strategy, each policy's quality, and the stretches a worse policy stayed deployed."""
    quality = {run["never"]: float(np.mean([w["never"] for w in run["weeks"]])) / prospects_n}
    quality |= {w["new"]: w["always"] / prospects_n for w in run["weeks"]}
    champions = [w["champion"] for w in run["weeks"]]
    worse = worse_deployed(champions, quality)
    # weeks in which a challenger deployed beside the champion was truly better (the evidence had not shown it yet)
    waiting = [w["week"] for w in run["weeks"] if any(quality[c] > quality[w["champion"]] for c in w["challengers"])]
    # promotions the gate refused (an estimate above the champion's, the difference's interval holding zero) of a truly worse policy
    refused_worse = sum(quality[c] < quality[w["champion"]] for w in run["weeks"] for c in w["refused"])
    by_challengers = sum(n for w in run["weeks"] for p, n in w["drawn"].items() if p != w["champion"])
    return {"totals": {s: float(sum(w[s] for w in run["weeks"])) for s in ("gated", "always", "never")},
            "refused_truly_worse": refused_worse,
            "challenger_drafts_share": by_challengers / sum(sum(w["drawn"].values()) for w in run["weeks"]),
            "quality": {p: round(q, 4) for p, q in quality.items()}, "champions": champions,
            "promotions": [{"week": w["week"], "policy": w["promoted"]} for w in run["weeks"] if w["promoted"]],
            "refused": sum(len(w["refused"]) for w in run["weeks"]), "worse_deployed": worse,
            "longest_worse_weeks": max((s["weeks"] for s in worse), default=0), "better_challenger_waiting_weeks": waiting}


REGRET_CODE = ("app", "bench/promotion.py", "bench/drafts.py")  # what a regret seed's figures depend on


def kept_regret_seeds(previous: dict | None, config: dict, seeds: int) -> dict[int, dict]:
    """The seeds (below `seeds`) of a part's last figures that were measured with this code and these settings, as
    `_regret_seed` returned them with where they were measured; none from code not committed."""
    if config["code"] == "changed" or not previous or previous.get("config") != config:
        return {}
    return {s["seed"]: {k: s[k] for k in ("seed", "never", "weeks", "seconds", "commit", "measured_at", "cpu")}
            for s in previous["per_seed"] if s["seed"] < seeds}


def measure_regret(seeds: int = REGRET_SEEDS, weeks: int = WEEKS, prospects: int = WEEKLY_PROSPECTS,
                   first_iterations: int = FIRST_ITERATIONS, weekly_iterations: int = WEEKLY_ITERATIONS,
                   traffic: dict | None = None, max_challengers: int = MAX_CHALLENGERS, held_out: int = HELD_OUT,
                   regress_every: int | None = None, sequential: bool = False, workers: int = 2,
                   previous: dict | None = None, more: int | None = None) -> dict:
    """`traffic`: {"share": s}, each challenger's fixed share (default 0.1), or {"floor", "min_sends"} for `auto`;
    `regress_every`: every so many weeks, the challenger is a run that did not continue the line; `sequential`: the
    deployment reads the always-valid interval. The seeds of `previous` (the part's last figures) measured with the same
    code and settings are kept, and at most `more` of the seeds still missing are measured: a figure of many seeds can
    be gathered over several sittings, each seed naming the commit and date it was measured on."""
    from concurrent.futures import ProcessPoolExecutor

    traffic = traffic or {"share": CHALLENGER_SHARE}
    regressed = regressed_weeks(weeks, regress_every)
    config = {"code": code_version(REGRET_CODE), "weeks": weeks, "prospects": prospects,
              "first_iterations": first_iterations, "weekly_iterations": weekly_iterations, "traffic": traffic,
              "max_challengers": max_challengers, "held_out": held_out, "regressed": regressed,
              "sequential": sequential}
    kept = kept_regret_seeds(previous, config, seeds)
    todo = [s for s in range(seeds) if s not in kept][:more]

    started, load = time.monotonic(), os.getloadavg()[0]
    measured_by = {"commit": commit(), "measured_at": machine()["date"], "cpu": machine()["cpu"]}
    with ProcessPoolExecutor(workers) as pool:
        runs = list(pool.map(_regret_seed, [(s, weeks, prospects, first_iterations, weekly_iterations, traffic,
                                             max_challengers, held_out, regressed, sequential) for s in todo]))
    runs = sorted([*kept.values(), *(r | measured_by for r in runs)], key=lambda r: r["seed"])
    if not runs:
        raise ValueError("no seed kept or measured: PROMOTION_MORE_SEEDS is 0 and no earlier figures match this code")
    summaries = [_summary(r, prospects) for r in runs]
    totals = {s: float(np.mean([m["totals"][s] for m in summaries])) for s in ("gated", "always", "never")}
    return {
        "config": config, "seeds": len(runs), "seeds_wanted": seeds, "resumed_seeds": sorted(kept),
        "weeks": weeks, "prospects_per_week": prospects, "first_iterations": first_iterations,
        "weekly_iterations": weekly_iterations, "traffic": "fixed" if "share" in traffic else "auto", **traffic,
        "max_challengers": max_challengers, "held_out": held_out, "regressed_weeks": regressed, "sequential": sequential,
        "totals": totals, "per_week": {s: [float(np.mean([r["weeks"][w][s] for r in runs])) for w in range(weeks)]
                                       for s in ("gated", "always", "never")},
        "per_seed": [m | r for r, m in zip(runs, summaries)],
        "longest_worse_weeks": max(m["longest_worse_weeks"] for m in summaries),
        "promotions": sum(len(m["promotions"]) for m in summaries),
        "week_seconds": float(np.mean([w["seconds"] for r in runs for w in r["weeks"]])),
        "seconds": round(time.monotonic() - started, 1), "load_average_before": round(load, 2),
        "load_average_after": round(os.getloadavg()[0], 2), "workers": workers,
    }


# ---------------------------------------------------------------- the section

PEEKING_REPEATS = 4000
PEEKING_SHARES = (0.1, 0.5)  # the regret part's fixed share; an even split, as `auto` gives a new challenger beside one
PEEKING_RATE = 0.3  # about the challengers' reply rate in the regret parts
PEEKING_GAPS = (0.05, 0.0, -0.02)  # the challenger better than the champion, as good, and worse


def measure_peeking(weeks: int = WEEKS, weekly_sends: int = WEEKLY_PROSPECTS, rate: float = PEEKING_RATE,
                    repeats: int = PEEKING_REPEATS) -> dict:
    started, load = time.monotonic(), os.getloadavg()[0]
    return {"weeks": weeks, "weekly_sends": weekly_sends, "rate": rate, "repeats": repeats, "load_average_before": load,
            "rows": [{"share": share, "gap": gap, "sequential": sequential,
                      "by_week": peeking(rate, share, weekly_sends, weeks, repeats, seed=index, gap=gap,
                                         sequential=sequential)}
                     for index, (gap, share, sequential) in enumerate(
                         (g, s, q) for g in PEEKING_GAPS for s in PEEKING_SHARES for q in (False, True))],
            "seconds": round(time.monotonic() - started, 1)}


REPLAY_VOLUMES = (200, 1_000, 5_000)  # sends a week: a small team's, and one 5 and 25 times larger
REPLAY_RATES = (0.0, 0.25, 0.5, 0.75)  # the chance that a week's challenger did not continue the line
REPLAY_REPEATS = 200


def replay_inputs(previous: dict) -> dict:
    """The true reply rates the replay draws from, as the API measured them: the line's challenger of each week (part
    `regret_auto`) and the first policy, means over seeds; a challenger that did not continue the line, the mean of
    those of part `regret_regressing_auto`."""
    line_part, regressing = previous.get("regret_auto"), previous.get("regret_regressing_auto")
    if not (line_part and regressing):
        raise ValueError("the replay draws from parts regret_auto and regret_regressing_auto: measure them first")
    line = [float(np.mean([s["quality"][s["weeks"][w]["new"]] for s in line_part["per_seed"]]))
            for w in range(line_part["weeks"])]
    first = float(np.mean([s["quality"][s["champions"][0]] for s in line_part["per_seed"]]))
    regressed = float(np.mean([s["quality"][w["new"]] for s in regressing["per_seed"] for w in s["weeks"]
                               if w["regressed"]]))
    return {"line": [round(q, 4) for q in line], "first": round(first, 4), "regressed": round(regressed, 4),
            "calibration_weeks": regressing["regressed_weeks"]}


def measure_replay(previous: dict, volumes: tuple[int, ...] = REPLAY_VOLUMES, rates: tuple[float, ...] = REPLAY_RATES,
                   repeats: int = REPLAY_REPEATS) -> dict:
    """Per weekly volume and chance of a regressing challenger, with either gate; and, at the regret parts' volume and
    regressing weeks, the replay of the API's part `regret_regressing_auto`."""
    started, load = time.monotonic(), os.getloadavg()[0]
    inputs = replay_inputs(previous)
    drawn = {k: inputs[k] for k in ("line", "first", "regressed")}
    drawn |= {"max_challengers": MAX_CHALLENGERS, "floor": AUTO_FLOOR}
    cells = [(volume, rate, sequential) for volume in volumes for rate in rates for sequential in (False, True)]
    rows = [{"weekly": volume, "rate": rate, "sequential": sequential,
             **replay_regret(**drawn, rate=rate, weekly=volume, repeats=repeats, seed=index, sequential=sequential)}
            for index, (volume, rate, sequential) in enumerate(cells)]
    calibration = replay_regret(**drawn, rate=tuple(inputs["calibration_weeks"]), weekly=WEEKLY_PROSPECTS,
                                repeats=repeats, seed=len(cells))
    return {"inputs": inputs, "repeats": repeats, "max_challengers": MAX_CHALLENGERS, "rows": rows,
            "calibration": calibration, "load_average_before": load, "seconds": round(time.monotonic() - started, 1)}


_AUTO = {"traffic": {"floor": AUTO_FLOOR, "min_sends": AUTO_MIN_SENDS}}
_REGRESSING = {"regress_every": REGRESS_EVERY}
# measure_regret's arguments per part: the challengers at fixed shares or with `auto` traffic, on the training line or
# where every third week's challenger did not continue it, with the fixed-sample or the always-valid (`sequential`) gate
REGRET_PARTS = {"regret": {}, "regret_auto": _AUTO, "regret_regressing": _REGRESSING,
                "regret_regressing_auto": _AUTO | _REGRESSING,
                "regret_regressing_auto_sequential": _AUTO | _REGRESSING | {"sequential": True}}
# peeking: how often weekly looks promote a challenger, with either interval; replay: where gating beats always-promote
PARTS = ("ope", *REGRET_PARTS, "peeking", "replay")


def measure(previous: dict | None = None, parts: tuple[str, ...] | None = None) -> dict:
    """Each part in turn (`PROMOTION_PARTS=ope` runs one; the others keep their previous figures), each with the date,
    the machine and its load average as it began. `OPE_SEEDS=n` measures the first n seeds of the OPE part (the
    target asks for 10: fewer is reported as not judged); `OPE_SEEDS_FILE=path` keeps each finished seed there, and a
    measurement started again with the same settings goes on where it stopped. A regret part keeps the seeds of its last
    figures measured on the same code and settings; `PROMOTION_MORE_SEEDS=n` measures at most n of the seeds missing."""
    parts = parts or tuple(p for p in os.environ.get("PROMOTION_PARTS", ",".join(PARTS)).split(",") if p)
    if unknown := set(parts) - set(PARTS):
        raise ValueError(f"unknown parts {sorted(unknown)}; any of {', '.join(PARTS)}")
    result = dict(previous or {})
    for part in parts:
        print(f"   promotion: {part}", flush=True)
        about = {"machine": machine()}
        if part == "ope":
            result[part] = measure_ope(seeds=int(os.environ.get("OPE_SEEDS", OPE_SEEDS))) | about
        elif part == "peeking":
            result[part] = measure_peeking() | about
        elif part == "replay":
            result[part] = measure_replay(result) | about
        else:
            more = os.environ.get("PROMOTION_MORE_SEEDS")
            result[part] = measure_regret(**REGRET_PARTS[part], previous=result.get(part),
                                          more=int(more) if more else None) | about
    return result
