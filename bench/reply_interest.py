"""Learning from what replies meant against learning from raw reply counts, in the simulated world (`app.simulation`).

Two learners choose which of a few candidate emails to send to each prospect's look-alike readers, round after round,
by Thompson sampling on the service's own outcome model (`app.loop.outcome_model`), as the loop chooses what it sends.
They differ only in what a reply is worth:

- `interest`: the interest scale (`app.outcomes.meaning`, the defaults of REPLY_INTEREST): a meeting or an interested
  reply counts for, a not-interested or an unsubscribe against; out-of-office notices count for nothing;
- `raw`: every reply that is not an out-of-office counts as a success (how the service learnt before replies were
  classified);

beside `uniform`, which never learns (each candidate equally often). The candidates are written once, before any
measurement, for every prospect alike: three that answer the prospect's first pain plainly (with a question, an offer
of a case study, a call), one pushy (hollow claims, a shouted subject, several asks), one off-target (another
industry's story) and one long and generic. The world decides what each reader does: each reader's probabilities of
each kind of reply (`Reader.reply_kind_probabilities`) are read once per candidate and each send draws its reply kind
from them; a reply's category is its kind (a bounce and an out-of-office, which both learners ignore, are left out
of the draw, and so are opens, which neither uses).

Scored at the end by the world's truth, which the learners cannot see into: each learner's final choice per prospect
(the candidate its model rates best) averaged over that prospect's readers: the positive-reply rate (interested or
meeting) and the unsubscribe rate per delivered send. Ten markets (seeds), 90 % t-intervals over them, and the paired
differences. Run: `python -m bench.reply_interest` (writes bench/reply_interest.json and renders its section of
bench/RESULTS.md from it; `--seeds`, `--rounds` to try less).
"""

import argparse
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.agent.schemas import Email
from app.kit.settings import DEFAULT_REPLY_INTEREST
from app.loop.features import content_hash, email_features, segment
from app.loop.outcome_model import OutcomeModel, SentEmail
from app.outcomes.meaning import InterestScale
from app.outcomes.replies import ReplyCategory
from app.simulation.people import SimulatedProspect, unseen_prospects
from app.simulation.readers import Market, Received, ReplyKind
from bench import machine
from bench.report import write

PROSPECTS = 8  # per market: each a segment of its own
READERS = 60  # look-alike readers per prospect
ROUNDS = 12
SENDS = 150  # per prospect per round, in batches that share one Thompson draw
BATCH = 10
PRIOR_SENDS = 20.0  # the service's default OUTCOME_PRIOR_SENDS
SENDER = "Sam Carter <sam@northwind.example>"
OUT = Path(__file__).with_name("reply_interest.json")
T90 = {10: 1.833, 9: 1.860, 8: 1.895, 7: 1.943, 6: 2.015, 5: 2.132, 4: 2.353, 3: 2.920, 2: 6.314}  # t(0.95, n − 1)


def candidates(prospect: SimulatedProspect) -> list[Email]:
    first, company, pain = prospect.first_name, prospect.company, prospect.pains[0]
    plain = (f"Hi {first},\n\n{company} teams like yours tell us that {pain} costs them hours every week. "
             f"We cut that by 30% for a team of your size in {prospect.industry} within a quarter.\n\n")
    other = "retail" if prospect.industry.lower() != "retail" else "logistics"
    return [
        Email(subject=f"{pain[:40]} at {company}", body=plain + "Is this a priority for you this quarter?\n\nSam",
              citations=[]),
        Email(subject=f"{pain[:40]} at {company}", body=plain + "Could I send you the two-page case study?\n\nSam",
              citations=[]),
        Email(subject=f"{pain[:40]} at {company}", body=plain + "Would a 20-minute call next week make sense?\n\nSam",
              citations=[]),
        Email(subject=f"REVOLUTIONARY results for {company}!!!", body=(
            f"Hi {first},\n\nI hope this email finds you well! I wanted to reach out because our industry-leading, "
            "best-in-class, game-changing platform will revolutionize everything your team does. It is seamless, "
            "powerful and transformative, an all-in-one solution with unparalleled results.\n\n"
            "Can we get 30 minutes on your calendar tomorrow? Should I send pricing today? Would you book a demo "
            "this week? Reply now!\n\nSam"), citations=[]),
        Email(subject=f"What {other} leaders are doing", body=(
            f"Hi {first},\n\nLeading {other} chains and {other} brands use us to keep their stores stocked and their "
            f"{other} margins up; one {other} group saved 12% on shrinkage last year.\n\n"
            "Would a 20-minute call next week make sense?\n\nSam"), citations=[]),
        Email(subject=f"An idea for {company}", body=(
            f"Hi {first},\n\n" + " ".join(
                ["Teams everywhere are rethinking how they work, and the tools they rely on change every year."] * 3)
            + " We help companies of every size do more with what they have, across every part of the business, "
            "with a platform that grows with them and a team that supports them at every step.\n\n"
            "Would a 20-minute call next week make sense?\n\nSam"), citations=[]),
    ]


LEARNERS = ("interest", "raw", "uniform")
SCALE = InterestScale.of(DEFAULT_REPLY_INTEREST)


@dataclass
class Tally:
    sends: int = 0
    positive: float = 0.0  # by the learner's own reading of a reply
    negative: float = 0.0


def worth(learner: str, kind: ReplyKind) -> tuple[float, float]:
    """(positive, negative) weight of one reply of this kind to the learner."""
    if learner == "raw":
        return (0.0, 0.0) if kind == ReplyKind.OUT_OF_OFFICE else (1.0, 0.0)
    category = ReplyCategory(kind.value)
    return SCALE.gain(category), SCALE.harm(category)


def one_market(seed: int, rounds: int) -> dict:
    market = Market(seed)
    prospects = unseen_prospects(seed, PROSPECTS)
    pools = [candidates(p) for p in prospects]
    features = [[email_features(e, p.name, p.company, segment(p.role, p.industry)) for e in pool]
                for p, pool in zip(prospects, pools, strict=True)]
    hashes = [[f"{p.email}:{content_hash(e)}" for e in pool] for p, pool in zip(prospects, pools, strict=True)]
    kinds = list(ReplyKind)
    # each reader's probability of each kind of reply to each candidate: the world's, read once
    truth = np.zeros((len(prospects), READERS, len(pools[0]), len(kinds)))
    for i, prospect in enumerate(prospects):
        for person in range(READERS):
            reader = market.reader(prospect, person)
            for j, email in enumerate(pools[i]):
                probabilities = reader.reply_kind_probabilities(Received(email.subject, email.body, SENDER))
                truth[i, person, j] = [probabilities.get(kind, 0.0) for kind in kinds]
    rest = np.clip(1 - truth.sum(axis=3, keepdims=True), 0, 1)
    draws = np.concatenate([truth, rest], axis=3)
    draws /= draws.sum(axis=3, keepdims=True)
    positive_truth = truth[..., kinds.index(ReplyKind.INTERESTED)] + truth[..., kinds.index(ReplyKind.MEETING)]
    unsubscribe_truth = truth[..., kinds.index(ReplyKind.UNSUBSCRIBE)]

    results = {}
    for learner in LEARNERS:
        rng = np.random.default_rng([seed, LEARNERS.index(learner)])
        tallies = [[Tally() for _ in pool] for pool in pools]
        model = OutcomeModel.fit([], PRIOR_SENDS)
        harm_ratio = SCALE.bottom / SCALE.top if learner == "interest" else 1.0
        for _ in range(rounds):
            for i in range(len(prospects)):
                for _ in range(SENDS // BATCH):
                    if learner == "uniform" or not model.fitted:
                        j = int(rng.integers(len(pools[i])))
                    else:
                        j = int(np.argmax([model.draw(features[i][k], hashes[i][k], rng).score
                                           for k in range(len(pools[i]))]))
                    people = rng.integers(READERS, size=BATCH)
                    for person in people:
                        outcome = rng.choice(len(kinds) + 1, p=draws[i, person, j])
                        tally = tallies[i][j]
                        tally.sends += 1
                        if outcome < len(kinds):
                            gain, harm = worth(learner, kinds[outcome])
                            tally.positive += gain
                            tally.negative += harm
            sent = [SentEmail(features[i][j], hashes[i][j], t.sends, 0, t.positive, t.negative)
                    for i, row in enumerate(tallies) for j, t in enumerate(row) if t.sends]
            model = OutcomeModel.fit(sent, PRIOR_SENDS, harm_ratio)
        if learner == "uniform":
            final = None
        else:
            final = [int(np.argmax([model.estimate(features[i][k], hashes[i][k]).score for k in range(len(pools[i]))]))
                     for i in range(len(prospects))]
        if final is None:  # never learns: every candidate equally often
            positive, unsubscribe = float(positive_truth.mean()), float(unsubscribe_truth.mean())
        else:
            positive = float(np.mean([positive_truth[i, :, j].mean() for i, j in enumerate(final)]))
            unsubscribe = float(np.mean([unsubscribe_truth[i, :, j].mean() for i, j in enumerate(final)]))
        results[learner] = {"positive": positive, "unsubscribe": unsubscribe, "final": final}
    results["candidates"] = {"positive": positive_truth.mean(axis=(0, 1)).tolist(),
                             "unsubscribe": unsubscribe_truth.mean(axis=(0, 1)).tolist()}
    return results


def interval(values: list[float]) -> dict:
    n = len(values)
    mean = float(np.mean(values))
    half = T90.get(n, 1.645) * float(np.std(values, ddof=1)) / math.sqrt(n) if n > 1 else float("nan")
    return {"mean": mean, "low": mean - half, "high": mean + half}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()
    where = machine()  # the commit, the machine and the load as it began
    started = time.time()
    markets = [one_market(seed, args.rounds) for seed in range(args.seeds)]
    summary = {learner: {metric: interval([m[learner][metric] for m in markets]) for metric in ("positive", "unsubscribe")}
               for learner in LEARNERS}
    paired = {
        "positive_difference": interval([m["interest"]["positive"] - m["raw"]["positive"] for m in markets]),
        "unsubscribe_difference": interval([m["interest"]["unsubscribe"] - m["raw"]["unsubscribe"] for m in markets]),
    }
    raw_unsub = summary["raw"]["unsubscribe"]["mean"]
    reduction = 1 - summary["interest"]["unsubscribe"]["mean"] / raw_unsub if raw_unsub else float("nan")
    report = {
        "where": where, "seeds": args.seeds, "rounds": args.rounds, "prospects": PROSPECTS, "readers": READERS,
        "sends_per_learner_per_market": args.rounds * PROSPECTS * SENDS, "summary": summary, "paired": paired,
        "unsubscribe_reduction": reduction, "markets": markets, "seconds": round(time.time() - started, 1),
    }
    OUT.write_text(json.dumps(report, indent=1))
    results = OUT.with_name("results.json")
    write(json.loads(results.read_text()) if results.exists() else {}, OUT.with_name("RESULTS.md"))  # its section
    for learner in LEARNERS:
        s = summary[learner]
        print(f"{learner:9} positive {s['positive']['mean']:.4f} [{s['positive']['low']:.4f}, {s['positive']['high']:.4f}]"
              f"  unsubscribe {s['unsubscribe']['mean']:.5f} [{s['unsubscribe']['low']:.5f}, "
              f"{s['unsubscribe']['high']:.5f}]")
    for name, value in paired.items():
        print(f"interest − raw {name}: {value['mean']:+.5f} [{value['low']:+.5f}, {value['high']:+.5f}]")
    print(f"unsubscribe rate {reduction:.0%} lower; {report['seconds']} s")


if __name__ == "__main__":
    main()
