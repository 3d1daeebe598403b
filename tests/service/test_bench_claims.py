"""The direction of each headline figure the simulated-world benchmark (bench/world.py) and the weekly loop
(bench/weekly.py) meet in bench/RESULTS.md, on one seed at the smallest sizes, through the benchmarks' own code: a
change that breaks a claim fails here before anyone reruns the benchmark. The figures themselves, with intervals over
10 seeds, are the benchmarks'. A target they miss has no claim here."""

import pytest

from bench import weekly
from bench.world import Sizes, _seed, summary

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def measured() -> dict:
    one = _seed((0, Sizes(seeds=1, iterations=1, unseen=12, look_alikes=6)))
    return one | {"summary": summary([one])}


def test_the_judge_ranks_candidates_as_the_world_does(measured):
    """Spearman between the judge's score and the world's positive-reply probability is positive (the benchmark's
    target is ≥ 0.3 in 8 of 10 seeds)."""
    judge = measured["judge"]
    assert judge["candidates"] >= 40
    assert judge["spearman"] is not None and judge["spearman"] > 0, judge


def test_both_policies_beat_the_rule_with_no_learning_on_unseen_industries(measured):
    """As in every seed measured (bench/RESULTS.md): the trained policy's drafts, and the untrained one's, earn more
    than the rule's. Trained against untrained is close (the target of 1.3x is missed), so no claim there; nor on the
    look-alikes, where all three are close."""
    transfer = measured["transfer"]["unseen"]
    assert transfer["trained"] > transfer["heuristic"], transfer
    assert transfer["untrained"] > transfer["heuristic"], transfer


def test_the_world_rates_every_writer_at_cold_email_rates(measured):
    """A few per cent at best: no writer's mean positive-reply probability reaches 10 %."""
    for split in ("unseen", "look_alikes"):
        transfer = measured["transfer"][split]
        assert 0 < transfer["untrained"] < 0.1 and 0 < transfer["heuristic"] < 0.1 and 0 < transfer["trained"] < 0.1


def test_the_published_emails_stay_short(measured):
    assert measured["summary"]["demo"]["median_published_words"] <= 150


@pytest.fixture(scope="module")
def weeks() -> list[dict]:
    return weekly._seed((0, weekly.Sizes(seeds=1, weeks=2, sends=60)))["weeks"]


def test_the_weekly_deployment_beats_the_rule_on_the_same_prospects(weeks):
    """The weekly loop's met target: the last week's drafts earn more than the rule with no learning on the same
    prospects (week 8's 1.06x at 10 seeds; week 8 over week 1, whose 1.25x is missed, has no claim)."""
    last = weeks[-1]
    assert last["world"] > last["rule"], last


def test_the_weekly_sends_come_back_through_the_providers_endpoints_at_cold_email_rates(weeks):
    for week in weeks:
        assert week["sent"] == 60 and 0 < week["delivered"] <= week["sent"], week
        assert week["events_accepted"] >= week["delivered"], week  # each delivery, at least, as a signed webhook event
        assert 0 <= week["realised"] < 0.1 and 0 < week["world"] < 0.1 and 0 < week["rule"] < 0.1, week
    assert 0 < weeks[-1]["untrained"] < 0.1 and 0 < weeks[-1]["week_1_policy"] < 0.1
