"""Means, spreads and confidence intervals of metrics over seeds."""
import math
from dataclasses import dataclass
from typing import Optional, Sequence

from scipy import stats as _scipy_stats


@dataclass
class Summary:
    mean: Optional[float]
    std: Optional[float]  # sample standard deviation (n - 1); None for fewer than 2 values
    n: int


def summarize(values: Sequence[float]) -> Summary:
    values = [float(v) for v in values]
    n = len(values)
    if not n:
        return Summary(None, None, 0)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else None
    return Summary(mean, std, n)


@dataclass
class Interval:
    delta: float                  # mean(a) - mean(b)
    low: Optional[float] = None   # None: not computable (one run on a side)
    high: Optional[float] = None
    df: Optional[float] = None    # Welch-Satterthwaite degrees of freedom
    note: str = ''

    def contains(self, value: float) -> Optional[bool]:
        return None if self.low is None else self.low <= value <= self.high


def welch_interval(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> Optional[Interval]:
    """Confidence interval of mean(a) - mean(b) without assuming equal variances
    (Welch's t interval); ``None`` if a side has no values."""
    sa, sb = summarize(a), summarize(b)
    if not sa.n or not sb.n:
        return None
    delta = sa.mean - sb.mean
    if sa.n < 2 or sb.n < 2:
        return Interval(delta, note='one run: no interval')
    va, vb = sa.std ** 2 / sa.n, sb.std ** 2 / sb.n
    se = math.sqrt(va + vb)
    if se == 0:  # every run of both sides identical: no spread to widen the interval
        return Interval(delta, delta, delta, math.inf, note='no spread between seeds')
    df = (va + vb) ** 2 / (va ** 2 / (sa.n - 1) + vb ** 2 / (sb.n - 1))
    half = _scipy_stats.t.ppf(0.5 + level / 2, df) * se
    return Interval(delta, delta - half, delta + half, df)


def seeds_needed(std: float, difference: float, level: float = 0.95, power: Optional[float] = None) -> int:
    """Runs per model so that a true ``difference`` between two models with seed spread
    ``std`` is resolved: the interval's half-width is below ``difference`` (``power=None``),
    or, with ``power``, an interval excluding 0 comes out with that probability.

    n >= 2 (t s / d)^2 for the half-width; n >= 2 ((t + z_power) s / d)^2 for power, with
    t the (1 + level) / 2 quantile of Student's t at the 2n - 2 degrees of freedom of n
    equal-spread runs a side (solved by counting up).
    """
    if std <= 0 or difference <= 0:
        raise ValueError(f'std and difference must be positive, got {std} and {difference}')
    z_power = 0. if power is None else _scipy_stats.norm.ppf(power)
    n = 2
    while True:
        t = _scipy_stats.t.ppf(0.5 + level / 2, 2 * n - 2)
        if 2 * ((t + z_power) * std / difference) ** 2 <= n:
            return n
        n += 1
