"""Automatic traffic between a champion and its challengers: top-two Thompson sampling over each policy's reply-rate
posterior, as GrowthBook's bandits do. Each policy's posterior is Beta(1 + replies, 1 + mature sends without one).
An arm's share is the probability that top-two sampling picks it: the posterior's best with probability 1/2,
otherwise the best of a redraw that names another. Every arm keeps a floor, and an arm with fewer than `min_sends`
mature sends has an even share (1/arms) while the others split the rest by top-two sampling: its early noise moves
no traffic, and a challenger added to a deployment neither waits nor resets what the others have earned."""

import numpy as np

TOP_TWO = 0.5  # the chance of sending the posterior's best rather than its challenger
DRAWS = 4000  # Monte Carlo draws per split: the shares' error is about 1 %


def auto_shares(outcomes: list[tuple[int, int]], *, floor: float, min_sends: int, seed: int) -> list[float]:
    """Shares for arms with (mature sends, replies) each, summing to 1, each at least `floor`."""
    arms = len(outcomes)
    if arms == 1:
        return [1.0]
    mature = [arm for arm, (sends, _) in enumerate(outcomes) if sends >= min_sends]
    shares = np.full(arms, 1 / arms)
    if len(mature) > 1:
        shares[mature] = len(mature) / arms * _top_two([outcomes[arm] for arm in mature], seed)
    shares = floor + (1 - floor * arms) * shares
    return [float(s) for s in shares / shares.sum()]


def _top_two(outcomes: list[tuple[int, int]], seed: int) -> np.ndarray:
    """Each arm's chance of being picked by top-two Thompson sampling, summing to 1."""
    arms = len(outcomes)
    rng = np.random.default_rng(seed)
    alpha = np.array([1 + replies for _, replies in outcomes], dtype=float)
    beta = np.array([1 + max(0, sends - replies) for sends, replies in outcomes], dtype=float)
    first = rng.beta(alpha, beta, size=(DRAWS, arms)).argmax(axis=1)
    second = rng.beta(alpha, beta, size=(DRAWS, arms))
    second[np.arange(DRAWS), first] = -1.0  # the best other than the first's winner
    picked = np.where(rng.random(DRAWS) < TOP_TWO, first, second.argmax(axis=1))
    return np.bincount(picked, minlength=arms) / DRAWS


def champion_share(challenger_shares: list[float]) -> float:
    """What fixed challengers leave the champion (never below 0: their sum may pass 1 by a rounding error)."""
    return max(0.0, 1 - sum(challenger_shares))
