"""The world benchmark's arithmetic and its report (bench/world.py, bench/report.py), on seeds made up by hand."""

import pytest

from bench.report import world_section
from bench.world import IMPRESSION, mean_interval, ratio_interval, summary


def seed(n: int, trained: float, rule: float, untrained: float, rewards: list[float], rho: float) -> dict:
    split = {"trained": trained, "heuristic": rule, "untrained": untrained, "trained_words": 120.0,
             "heuristic_words": 118.0, "untrained_words": 90.0, "trained_negative": 0.02, "heuristic_negative": 0.02,
             "untrained_negative": 0.01, "trained_judge": 0.8, "untrained_judge": 0.7}
    traits = {name: {"world": 0.5 if name == "relevance" else 0.0, "judge": 0.1} for name in (*IMPRESSION, "words")}
    return {"seed": n, "commit": "abc", "run_s": 60.0, "target": "scn",
            "transfer": {"unseen": split, "look_alikes": dict(split)},
            "demo": {"rewards": rewards, "reward_ratio": sum(rewards[-3:]) / 3 / rewards[0],
                     "published_world": [0.01, 0.02, 0.03, 0.03], "rule_world": 0.02,
                     "published_words": [90, 100, 120, 200], "rule_words": 118},
            "judge": {"candidates": 200, "spearman": rho, "world_mean": 0.01, "world_max": 0.05, "traits": traits}}


def test_intervals_resample_the_seeds_keeping_each_seeds_pair_together():
    assert mean_interval([0.5, 0.5, 0.5]) == [0.5, 0.5]
    assert ratio_interval([2.0, 4.0], [1.0, 2.0]) == [2.0, 2.0]  # every resample of paired seeds has ratio 2
    low, high = mean_interval([0.0, 1.0])
    assert 0.0 <= low < 0.5 < high <= 1.0


def test_the_summary_counts_seeds_at_each_target_and_divides_means_not_seeds():
    seeds = [seed(0, 0.03, 0.02, 0.01, [0.5, 0.6, 0.6, 0.6], 0.4), seed(1, 0.01, 0.02, 0.01, [0.5, 0.5, 0.5, 0.5], 0.1)]
    found = summary(seeds)
    unseen = found["transfer"]["unseen"]
    assert unseen["trained"] == pytest.approx(0.02) and unseen["trained_over_heuristic"] == pytest.approx(1.0)
    assert unseen["trained_over_untrained"] == pytest.approx(2.0)
    assert found["demo"]["seeds_at_1_2"] == 1  # 0.6 / 0.5 = 1.2 counts; 1.0 does not
    assert found["demo"]["median_published_words"] == 120  # iterations 1-3 of both seeds: 100, 120, 200 twice
    assert found["judge"]["seeds_at_0_3"] == 1 and found["judge"]["spearman_median"] == pytest.approx(0.25)


def test_the_report_gives_each_target_its_verdict_and_says_what_the_judge_misses():
    seeds = [seed(n, 0.03, 0.02, 0.01, [0.5, 0.6, 0.7, 0.7], 0.5) for n in range(10)]
    text = "\n".join(world_section({"sizes": {"iterations": 10, "unseen": 100, "look_alikes": 50}, "late": 3,
                                    "workers": 2, "load_average_after": [1.0, 1.0, 1.0], "per_seed": seeds,
                                    **summary(seeds)}))
    assert "| unseen industries | 3.00% (3.00%–3.00%) | 2.00% (2.00%–2.00%) | 1.00% (1.00%–1.00%) | 1.50 (1.50–1.50), met |" in text
    assert "**≥ 1.2× in 10 of 10 seeds** (target: at least 9 of 10): met" in text
    assert "target ≤ 150): met" in text
    assert "**≥ 0.3 in 10 of 10 seeds** (target: 8 of 10): met" in text
    assert "The world's probability rises with pains answered" in text  # relevance: world 0.5, judge 0.1
