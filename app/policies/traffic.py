"""Automatic traffic between a champion and its challengers: top-two Thompson sampling over each policy's reply-rate
posterior, as GrowthBook's bandits do. Each policy's posterior is Beta(1 + replies, 1 + mature sends without one).
An arm's share is the probability that top-two sampling picks it: the posterior's best with probability 1/2,
otherwise the best of a redraw that names another. Every arm keeps a floor, and until each arm has `min_sends`
mature sends the split stays even: early noise moves no traffic."""

import numpy as np

TOP_TWO = 0.5  # the chance of sending the posterior's best rather than its challenger
DRAWS = 4000  # Monte Carlo draws per split: the shares' error is about 1 %


def auto_shares(outcomes: list[tuple[int, int]], *, floor: float, min_sends: int, seed: int) -> list[float]:
    """Shares for arms with (mature sends, replies) each, summing to 1, each at least `floor`."""
    arms = len(outcomes)
    if arms == 1:
        return [1.0]
    if any(sends < min_sends for sends, _ in outcomes):
        return [1 / arms] * arms
    rng = np.random.default_rng(seed)
    alpha = np.array([1 + replies for _, replies in outcomes], dtype=float)
    beta = np.array([1 + max(0, sends - replies) for sends, replies in outcomes], dtype=float)
    first = rng.beta(alpha, beta, size=(DRAWS, arms)).argmax(axis=1)
    second = rng.beta(alpha, beta, size=(DRAWS, arms))
    second[np.arange(DRAWS), first] = -1.0  # the best other than the first's winner
    picked = np.where(rng.random(DRAWS) < TOP_TWO, first, second.argmax(axis=1))
    shares = np.bincount(picked, minlength=arms) / DRAWS
    shares = floor + (1 - floor * arms) * shares
    return [float(s) for s in shares / shares.sum()]
