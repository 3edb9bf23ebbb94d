"""Match statistics: Elo with its 95 % interval, from per-game scores (trinomial) or from game pairs (pentanomial),
and the likelihood of superiority (LOS).

The pentanomial figures are fastchess's: a pair is one opening played with both colours and scores 0, 1/2, 1, 3/2
or 2 points (Ptnml(0-2), counted as 0, 0.25, 0.5, 0.75 or 1 a game); the interval is the mean pair score plus or minus
the normal quantile times its standard error (the pairs' variance over the pairs, divided by their number), mapped
to Elo; LOS is the normal probability that the mean exceeds 1/2. The trinomial figures are computed the same way from
the per-game scores (1, 1/2, 0) with the sample variance (n - 1), and their LOS from wins and losses alone
(draws carry no information), as BayesElo and cutechess give it.
"""

import math
from collections import namedtuple

# The two-sided 95 % quantile of the normal distribution, as fastchess uses it.
Z95 = 1.959964
# Scores are kept this far inside (0, 1) before Elo is taken: a score of 0 or 1 has no finite Elo.
SCORE_CLAMP = 1e-6
PAIR_SCORES = (0.0, 0.25, 0.5, 0.75, 1.0)

Estimate = namedtuple("Estimate", "elo low high los")
Estimate.__doc__ = "Elo, the bounds of its 95 % interval, and the likelihood of superiority (0 to 1)."


def elo(score):
    """The Elo difference of an expected score (0 to 1): -400 log10(1 / score - 1)."""
    score = min(max(score, SCORE_CLAMP), 1 - SCORE_CLAMP)
    return -400 * math.log10(1 / score - 1)


def half_width(estimate):
    """The +/- of an estimate: half its interval's width in Elo, as fastchess prints it."""
    return (estimate.high - estimate.low) / 2


def los_from_wins(wins, losses):
    """The likelihood of superiority (0 to 1) from wins and losses: 1/2 (1 + erf((W - L) / sqrt(2 (W + L))))."""
    if wins + losses == 0:
        return 0.5
    return 0.5 * (1 + math.erf((wins - losses) / math.sqrt(2 * (wins + losses))))


def game_scores(wins, draws, losses):
    """The per-game scores of a record: 1 for each win, 1/2 for each draw, 0 for each loss."""
    return [1.0] * wins + [0.5] * draws + [0.0] * losses


def trinomial(scores):
    """Elo with its 95 % interval from per-game scores (1, 1/2, 0), and LOS from the wins and losses among them."""
    n = len(scores)
    if n == 0:
        raise ValueError("no games")
    mean = sum(scores) / n
    variance = sum((s - mean) ** 2 for s in scores) / max(n - 1, 1)
    margin = Z95 * math.sqrt(variance / n)
    wins = sum(1 for s in scores if s == 1.0)
    losses = sum(1 for s in scores if s == 0.0)
    return Estimate(elo(mean), elo(mean - margin), elo(mean + margin), los_from_wins(wins, losses))


def pentanomial(ptnml):
    """Elo with its 95 % interval and LOS from the game pairs' counts Ptnml(0-2): [0, 1/2, 1, 3/2, 2 points]."""
    if len(ptnml) != 5:
        raise ValueError("a pentanomial count has five entries")
    n = sum(ptnml)
    if n == 0:
        raise ValueError("no game pairs")
    mean = sum(p * s for p, s in zip(ptnml, PAIR_SCORES)) / n
    variance = sum(p * (s - mean) ** 2 for p, s in zip(ptnml, PAIR_SCORES)) / n
    margin = Z95 * math.sqrt(variance / n)
    if variance > 0:
        los = 0.5 * (1 + math.erf((mean - 0.5) / math.sqrt(2 * variance / n)))
    else:
        los = 0.5 if mean == 0.5 else float(mean > 0.5)
    return Estimate(elo(mean), elo(mean - margin), elo(mean + margin), los)


def difference(first, second):
    """The Elo difference first minus second of two independent estimates, with its 95 % interval (each estimate's
    standard error taken as its half width over the normal quantile, the two added in quadrature) and the likelihood
    that the first is the stronger."""
    spread = math.hypot(half_width(first) / Z95, half_width(second) / Z95)
    delta = first.elo - second.elo
    if spread > 0:
        los = 0.5 * (1 + math.erf(delta / (spread * math.sqrt(2))))
    else:
        los = 0.5 if delta == 0 else float(delta > 0)
    return Estimate(delta, delta - Z95 * spread, delta + Z95 * spread, los)


def pair_counts(pair_points):
    """Ptnml(0-2) from the points of each game pair (0, 0.5, 1, 1.5 or 2)."""
    counts = [0] * 5
    for points in pair_points:
        counts[round(2 * points)] += 1
    return counts


def wilson(hits, n, z=Z95):
    """The Wilson score interval (low, high) of a proportion of hits out of n: it stays inside [0, 1] and does not
    collapse to a point at 0 or n hits, where the normal interval does."""
    if n <= 0:
        raise ValueError("no trials")
    if not 0 <= hits <= n:
        raise ValueError("hits must lie between 0 and n")
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    spread = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - spread), min(1.0, centre + spread)
