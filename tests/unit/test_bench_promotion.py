"""The promotion benchmark's own arithmetic (bench/promotion.py), each against a case worked by hand."""

import math
import re

import numpy as np
import pytest

from bench.promotion import (
    accuracy,
    batches,
    kept_regret_seeds,
    peeking,
    project,
    promotion_order,
    regressed_weeks,
    replay_inputs,
    replay_regret,
    sends_needed,
    stratified_truth,
    week_look_alikes,
    worse_deployed,
    written_by,
)
from bench.report import regressions_compared, regret_sittings, regret_sizes, replay_section, seeds_interval


def test_accuracy_counts_a_missing_estimate_as_outside_and_measures_bias_and_spread_from_the_others():
    estimates = [{"value": 0.20, "low": 0.15, "high": 0.25}, {"value": 0.25, "low": 0.21, "high": 0.29}, None]
    found = accuracy(estimates, [0.22, 0.20, 0.30], tolerance=0.03)
    # errors -0.02 (within) and +0.05 (not); the missing one is not within either
    assert found["within"] == pytest.approx(1 / 3)
    assert found["bias"] == pytest.approx(0.015)
    assert found["spread"] == pytest.approx(math.sqrt(((-0.02 - 0.015) ** 2 + (0.05 - 0.015) ** 2) / 1))
    assert found["rmse"] == pytest.approx(math.sqrt((0.02**2 + 0.05**2) / 2))
    assert found["coverage"] == 0.5 and found["missing"] == 1  # 0.22 in [0.15, 0.25]; 0.20 not in [0.21, 0.29]
    assert accuracy([None, None], [0.1, 0.2])["within"] == 0.0


def test_sends_needed_is_the_binomial_noise_of_the_challengers_own_sends():
    # z(0.8 two-sided) = 1.28155; (1.28155 / 0.03)^2 · 0.3 · 0.7 / 0.1 = 3832.4
    assert sends_needed(0.3, 0.1) == 3833
    assert sends_needed(0.3, 0.5) == math.ceil(3832.4 / 5)


def test_written_by_takes_the_policys_own_drafts_and_the_others_in_prospect_order():
    drafts = [{"policy": "a", "prospect": {"id": "p1"}}, {"policy": "b", "prospect": {"id": "p2"}},
              {"policy": "a", "prospect": {"id": "p3"}}]
    extra = [{"policy": "b", "prospect": {"id": "p1"}}, {"policy": "b", "prospect": {"id": "p3"}}]
    assert [(d["policy"], d["prospect"]["id"]) for d in written_by(drafts, "b", extra)] == [("b", "p1"), ("b", "p2"), ("b", "p3")]
    with pytest.raises(AssertionError):
        written_by(drafts, "b", list(reversed(extra)))  # out of order
    with pytest.raises(AssertionError):
        written_by(drafts, "b", extra + [{"policy": "b", "prospect": {"id": "p4"}}])


def _report(policy: str, dr: float | None, snips: float | None) -> dict:
    interval = lambda v: None if v is None else {"value": v, "low": v - 0.1, "high": v + 0.1}  # noqa: E731
    return {"policy": policy, "off_policy": {"dr": interval(dr), "snips": interval(snips)}}


def test_promotion_order_reads_dr_else_snips_and_keeps_the_challengers_above_the_champion_best_first():
    result = {"policies": [_report("champ", 0.20, 0.5), _report("x", None, 0.25), _report("y", 0.30, 0.1),
                           _report("z", 0.15, 0.9), _report("w", None, None)]}
    assert promotion_order(result, "champ", ["x", "y", "z", "w"]) == ["y", "x"]
    assert promotion_order({"policies": [_report("champ", None, None), _report("x", 0.5, 0.5)]}, "champ", ["x"]) == []


def test_worse_deployed_counts_the_weeks_a_policy_worse_than_the_one_it_replaced_stayed():
    quality = {"A": 0.2, "B": 0.1, "C": 0.3}
    assert worse_deployed(["A", "A", "B", "B", "C", "A"], quality) == [
        {"policy": "B", "replaced": "A", "from_week": 3, "weeks": 2},
        {"policy": "A", "replaced": "C", "from_week": 6, "weeks": 1}]
    assert worse_deployed(["A", "C", "C"], quality) == []


def test_the_projection_replays_the_logging_with_the_services_estimators():
    champion, certain = np.zeros(50), np.ones(50)
    # every challenger send is a reply, no champion send is: SNIPS is exactly 1, and DR with the true rates (all 1) too
    found = project(champion, certain, 0.1, sends=200, repeats=20, seed=0)
    assert found["snips"] == 1.0 and found["dr_perfect"] == 1.0 and 0 <= found["ips"] <= 1
    # half the prospects always reply to the challenger, half never: DR with each prospect's true rate is the mean over
    # all 2,000 prospects drawn (sd 0.5 / √2000 = 0.011), SNIPS the mean over the ~200 its arm drew (sd 0.035)
    halves = np.array([0.0, 1.0] * 25)
    found = project(champion, halves, 0.1, sends=2000, repeats=50, seed=0)
    assert found["dr_perfect"] >= 0.95 and found["snips"] < 0.8


def test_batches_take_the_stream_of_sends_to_each_volume_a_thousand_at_most():
    assert batches((400, 1000, 4000)) == [[400], [600], [1000, 1000, 1000]]
    assert batches((1500,), largest=1000) == [[1000, 500]]


def test_stratified_truth_weighs_each_scenario_alike_and_says_how_sure_it_is():
    value, se = stratified_truth([0.1, 0.3, 0.5, 0.5, 0.5], ["a", "a", "b", "b", "b"])
    assert value == pytest.approx((0.2 + 0.5) / 2)
    assert se == pytest.approx(math.sqrt(0.02 / 2) / 2)  # a: var 0.02 over 2; b: 0


def test_a_stopped_measurement_keeps_its_finished_seeds_for_the_same_code_and_settings_only(tmp_path):
    from bench.world import keep_seed, kept_seeds

    path = tmp_path / "seeds.jsonl"
    config = {"code": "abc", "volumes": [400], "iterations": 5}
    assert kept_seeds(path, config) == {}
    keep_seed(path, config, {"seed": 3, "truth": {}})
    assert kept_seeds(path, config) == {3: {"seed": 3, "truth": {}}}
    assert kept_seeds(path, config | {"volumes": [400, 1000]}) == {}
    assert kept_seeds(path, config | {"code": "def"}) == {}
    keep_seed(path, config | {"code": "changed"}, {"seed": 4})
    assert kept_seeds(path, config | {"code": "changed"}) == {}  # code not committed is never resumed
    keep_seed(None, config, {"seed": 5})  # without a file nothing is kept
    assert kept_seeds(path, config) == {3: {"seed": 3, "truth": {}}}


def test_regressed_weeks_are_every_nth_week_and_none_without_a_period():
    assert regressed_weeks(8, 3) == [3, 6]
    assert regressed_weeks(9, 3) == [3, 6, 9]
    assert regressed_weeks(2, 3) == []
    assert regressed_weeks(8, None) == []


def test_a_week_of_two_thousand_prospects_is_two_lists_of_distinct_look_alikes():
    from app.knowledge_graph.service import demo_graph
    from app.outcomes.simulated_team import SimulatedTeam

    team = SimulatedTeam(demo_graph())
    week = week_look_alikes(team, 2_000, seed=7)
    assert len({la.prospect["id"] for la in week}) == 2_000
    assert [la.prospect for la in week[:1_000]] == [la.prospect for la in team.look_alikes(1_000, seed=7)]


def test_a_regret_part_below_issue_50s_sizes_says_which_sizes_fell_short():
    sizes = {"seeds": 2, "weeks": 8, "prospects_per_week": 600}
    assert regret_sizes(sizes) == ("**Measured at reduced sizes**: 2 seeds of the 10 the targets ask for; 600 sends a "
                                    "week of the 2,000 the targets ask for.")
    assert regret_sizes(sizes | {"seeds": 10, "prospects_per_week": 2_000}) == "10 seeds, 8 weeks of 2,000 sends."


def _measured_seed(seed: int, commit: str, day: str) -> dict:
    return {"seed": seed, "never": "r@5", "weeks": [], "seconds": 1.0, "commit": commit,
            "measured_at": day + "T01:00:00", "cpu": "AMD EPYC", "totals": {"gated": 1.0}}


def test_a_regret_part_keeps_only_seeds_measured_on_the_same_committed_code_and_sizes():
    config = {"code": "a,b,c", "weeks": 8, "prospects": 2_000}
    measured = [_measured_seed(0, "aaa", "2026-11-28"), _measured_seed(1, "bbb", "2026-11-29")]
    previous = {"config": config, "per_seed": measured}
    kept = kept_regret_seeds(previous, config, seeds=10)
    assert sorted(kept) == [0, 1] and kept[1]["commit"] == "bbb" and "totals" not in kept[1]  # the run, not its summary
    assert sorted(kept_regret_seeds(previous, config, seeds=1)) == [0]  # a smaller figure keeps its own seeds only
    assert kept_regret_seeds(previous, config | {"code": "a,b,d"}, seeds=10) == {}  # other code
    assert kept_regret_seeds(previous, config | {"weeks": 6}, seeds=10) == {}  # other sizes
    changed = config | {"code": "changed"}
    assert kept_regret_seeds(previous | {"config": changed}, changed, seeds=10) == {}  # uncommitted code
    assert kept_regret_seeds({"per_seed": measured}, config, seeds=10) == {}  # figures from before seeds were kept
    assert kept_regret_seeds(None, config, seeds=10) == {}


def test_a_regret_part_says_which_seeds_were_measured_on_which_commit_and_day():
    seeds = [_measured_seed(0, "aaa", "2026-11-28"), _measured_seed(1, "aaa", "2026-11-28"),
             _measured_seed(2, "bbb", "2026-11-29")]
    assert regret_sittings(seeds) == (" Seed(s) 0, 1 measured on commit `aaa` on 2026-11-28 (AMD EPYC); seed(s) 2 "
                                      "measured on commit `bbb` on 2026-11-29 (AMD EPYC).")
    assert regret_sittings([{"seed": 0}]) == ""  # figures from before seeds were kept


def test_the_regressions_compared_are_each_strategys_loss_and_the_gap_on_either_line():
    totals = lambda gated, always: {"totals": {"gated": gated, "always": always, "never": 0.0}}  # noqa: E731
    found = regressions_compared({"regret": totals(460.0, 520.0), "regret_regressing": totals(440.0, 470.0) | {
        "regressed_weeks": [3, 6], "weeks": 8}})
    # always lost 520 − 470 = 50.0, gated 460 − 440 = 20.0; gated was 60.0 behind on the line, 30.0 on the regressing one
    assert "| fixed shares | 50.0 | 20.0 | 60.0 | 30.0 |" in found
    assert not any(row.startswith("| auto traffic") for row in found)  # no auto parts measured
    assert regressions_compared({"regret": totals(1.0, 2.0)}) == []


def test_looking_every_week_promotes_an_equal_challenger_more_often_than_one_look():
    by_week = peeking(0.3, 0.5, 200, 8, 2000, seed=0)
    assert by_week == sorted(by_week)  # a promotion, once made, stays made
    # one look: the 90 % interval of the difference above zero, a one-sided 5 % test (±3 standard errors of 2,000 draws)
    assert 0.05 - 0.015 <= by_week[0] <= 0.05 + 0.015
    assert by_week[-1] > 2 * by_week[0]  # eight looks: more than twice the rate
    assert peeking(0.3, 0.5, 200, 8, 2000, seed=0, gap=-0.03)[-1] < by_week[-1] / 2  # a worse one: far less often
    # the always-valid interval holds at every look at once: eight looks stay under a one-sided 5 %
    assert peeking(0.3, 0.5, 200, 8, 2000, seed=0, sequential=True)[-1] <= 0.05


def _replay(**overrides) -> dict:
    arguments = {"line": [0.30, 0.34, 0.38, 0.42], "first": 0.25, "regressed": 0.25, "rate": 0.0, "weekly": 200,
                 "repeats": 10, "seed": 0, "max_challengers": 3, "floor": 0.01} | overrides
    return replay_regret(**arguments)


def test_the_replay_s_always_and_never_promote_send_the_true_rates_of_the_week_s_challenger_and_the_first_policy():
    found = _replay(rate=(2,), regressed=0.10)
    # week 2's challenger regressed: 200 · (0.30 + 0.10 + 0.38 + 0.42); the first policy every week: 200 · 4 · 0.25
    assert found["totals"]["always"] == pytest.approx(200 * 1.20)
    assert found["totals"]["never"] == pytest.approx(200 * 4 * 0.25)


def test_on_a_rising_line_the_gated_loop_lags_always_promote_in_every_replay():
    found = _replay()
    assert found["gated_at_least_always"] == 0.0  # each new challenger drafts an even share for its first week
    assert found["totals"]["never"] < found["totals"]["gated"] < found["totals"]["always"]


def test_challengers_far_worse_than_the_first_policy_are_never_promoted_and_the_gated_loop_beats_always_promote():
    found = _replay(rate=1.0, regressed=0.05)
    assert found["promotions"] == 0 and found["worse_deployed"] == 0 and found["longest_worse_weeks"] == 0
    assert found["totals"]["always"] == pytest.approx(200 * 4 * 0.05)
    assert found["gated_at_least_always"] == 1.0
    assert found["totals"]["always"] < found["totals"]["gated"] < found["totals"]["never"]


def test_the_replay_draws_the_rates_the_api_measured():
    def seed(qualities: dict, weeks: list[tuple[str, bool]]) -> dict:
        return {"quality": qualities, "champions": ["first"] * len(weeks),
                "weeks": [{"new": new, "regressed": regressed} for new, regressed in weeks]}
    line = {"weeks": 2, "per_seed": [seed({"first": 0.24, "a": 0.30, "b": 0.36}, [("a", False), ("b", False)]),
                                     seed({"first": 0.26, "c": 0.32, "d": 0.34}, [("c", False), ("d", False)])]}
    regressing = {"regressed_weeks": [2],
                  "per_seed": [seed({"first": 0.24, "a": 0.30, "x": 0.20}, [("a", False), ("x", True)]),
                               seed({"first": 0.26, "c": 0.32, "y": 0.24}, [("c", False), ("y", True)])]}
    found = replay_inputs({"regret_auto": line, "regret_regressing_auto": regressing})
    assert found == {"line": [0.31, 0.35], "first": 0.25, "regressed": 0.22, "calibration_weeks": [2]}
    with pytest.raises(ValueError, match="regret_auto"):
        replay_inputs({"regret_auto": line})


def test_the_replay_s_report_names_the_smallest_chance_of_regression_at_which_gating_sends_as_many():
    def row(rate: float, sequential: bool, difference: float) -> dict:
        return {"weekly": 200, "rate": rate, "sequential": sequential, "gated_minus_always": difference,
                "gated_minus_always_se": 1.0, "gated_at_least_always": 0.5, "worse_deployed": 0.01 * sequential,
                "longest_worse_weeks": 2 * sequential, "largest_worse_gap": 0.02,
                "totals": {"gated": 450.0 + difference, "always": 450.0, "never": 400.0}}
    rows = [row(0.0, False, -30.0), row(0.0, True, -31.0), row(0.5, False, 2.0), row(0.5, True, -1.0),
            row(0.75, False, 9.0), row(0.75, True, 6.0)]
    replay = {"inputs": {"line": [0.3, 0.32], "first": 0.25, "regressed": 0.23, "calibration_weeks": [2]},
              "rows": rows, "repeats": 10, "calibration": row(0.0, False, 0.0), "seconds": 1.0,
              "load_average_before": 0.1, "machine": {"date": "d", "cores": 2, "memory_gib": 1.0}}
    found = replay_section(replay, {})
    assert "| 200 | 0.5 | +2.0 ± 1.0 | 50% | 0.0% | -1.0 ± 1.0 | 50% | 1.0% |" in found
    # 420 of 450 on the line; at least as many from 0.5 (not 0.75, the other row at or above zero)
    assert any("sends 93.3% of always-promote's replies" in line and "from a chance of 0.5 " in line for line in found)
    assert any("always-valid gate: deployed in at most 1.0% of a row's replays, for at most 2 weeks" in line
               for line in found)



def test_a_regret_part_of_three_seeds_or_more_gives_the_gated_loops_ratios_an_interval_over_the_seeds():
    seeds = [{"totals": {"gated": g, "always": 100.0, "never": 50.0}} for g in (90.0, 100.0, 110.0)]
    # gated ÷ always over resampled seeds lies within the seeds' extremes, 0.9 and 1.1, around 1; never's is twice that
    found = re.fullmatch(r"; 90 % interval over the seeds (\d\.\d+)–(\d\.\d+)", seeds_interval(seeds, "always"))
    assert found and 0.9 <= float(found[1]) < 1.0 < float(found[2]) <= 1.1
    found = re.fullmatch(r"; 90 % interval over the seeds (\d\.\d+)–(\d\.\d+)", seeds_interval(seeds, "never"))
    assert found and 1.8 <= float(found[1]) < 2.0 < float(found[2]) <= 2.2
    assert seeds_interval(seeds[:2], "always") == ""  # two seeds give no meaningful interval
