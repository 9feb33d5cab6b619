"""Seed 003's automated analysis (§3.2): split latencies into classes with Jenks natural breaks (jenkspy), choose
the class count by silhouette score (the answer's confidence), take the abnormal points, and read the property
off the most common interval between neighbouring abnormal points."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import jenkspy
import numpy as np

# Jenks natural breaks (jenkspy) costs O(n^2): longer series are classified on a sample of their sorted values
# (the breaks of 3,000 quantiles sit where those of 50,000 values do), then the breaks label every value.
MAX_POINTS = 3000


@dataclass(frozen=True)
class Classification:
    """One Jenks classification of a series: ``labels[i]`` is the class of value ``i`` (0 = lowest values)."""

    n_classes: int
    breaks: tuple[float, ...]
    labels: np.ndarray
    silhouette: float

    def counts(self) -> np.ndarray:
        return np.bincount(self.labels, minlength=self.n_classes)

    def abnormal(self, side: str = "smaller") -> np.ndarray:
        """Mask of the abnormal points. ``smaller``: the class with the fewest points (the paper's rule for two
        classes); ``high``: every class above the most populated one (spikes); ``low``: every class below it
        (dips, e.g. reads that two units serve in parallel)."""
        counts = self.counts()
        if side == "smaller":
            return self.labels == int(np.argmin(np.where(counts > 0, counts, np.iinfo(np.int64).max)))
        normal = int(np.argmax(counts))
        return self.labels > normal if side == "high" else self.labels < normal


def classify(values, n_classes: int) -> Classification | None:
    """Jenks natural breaks into ``n_classes``; None when the values have fewer distinct levels than that."""
    x = np.asarray(values, dtype=float)
    if len(np.unique(x)) < n_classes or len(x) <= n_classes:
        return None
    breaks = tuple(float(b) for b in jenkspy.jenks_breaks(x, n_classes=n_classes))
    # Class i holds (breaks[i], breaks[i+1]]; the lowest class also holds its lower edge.
    labels = np.clip(np.searchsorted(np.asarray(breaks[1:-1]), x, side="left"), 0, n_classes - 1)
    return Classification(n_classes, breaks, labels, silhouette_1d(x, labels))


def classify_best(values, min_classes: int = 2, max_classes: int = 5) -> list[Classification]:
    """Every class count from ``min_classes`` to ``max_classes`` that the data supports, best silhouette first."""
    found = [c for k in range(min_classes, max_classes + 1) if (c := classify(values, k)) is not None]
    return sorted(found, key=lambda c: -c.silhouette)


def classify_series(values, *, log: bool = False, min_classes: int = 2, max_classes: int = 5,
                    max_points: int = MAX_POINTS) -> list[Classification]:
    """Seed 003 §3.2's classification of a measured series, as every probe uses it: Jenks natural breaks for each
    class count from ``min_classes`` to ``max_classes`` the data supports, best silhouette first, with labels
    and silhouette for every value. ``log``: classify log10 of the values (latencies spanning microseconds to
    seconds). A series longer than ``max_points`` is classified on a quantile sample that keeps its largest
    values (up to 1 %, so rare spikes are in it); a classification whose breaks then put every value in one
    class is dropped."""
    x = np.asarray(values, dtype=float)
    if log:
        x = np.log10(np.maximum(x, 1.0))
    if len(x) <= max_points:
        return classify_best(x, min_classes, max_classes)
    ordered = np.sort(x)
    top = min(len(x) // 100, max_points // 10)
    index = np.linspace(0, len(x) - top - 1, max_points - top).round().astype(int)
    sample = np.concatenate([ordered[index], ordered[len(x) - top:]])
    out = []
    for c in classify_best(sample, min_classes, max_classes):
        labels = np.clip(np.searchsorted(np.asarray(c.breaks[1:-1]), x, side="left"), 0, c.n_classes - 1)
        if len(np.unique(labels)) < 2:
            continue
        out.append(Classification(c.n_classes, c.breaks, labels, silhouette_1d(x, labels)))
    return sorted(out, key=lambda c: -c.silhouette)


def silhouette_1d(values, labels) -> float:
    """Mean silhouette coefficient of a one-dimensional clustering, exact, in O(n log n).

    Written here rather than taken from scikit-learn: its silhouette_score builds the n x n distance matrix
    (O(n^2) time and memory), too slow for the 10^4-10^5 latencies a probe gathers. On a line, the mean
    distance from x to a cluster follows from the cluster's sorted values and prefix sums."""
    x = np.asarray(values, dtype=float)
    labels = np.asarray(labels)
    clusters = np.unique(labels)
    if len(clusters) < 2 or len(x) < 3:
        return 0.0
    mean_distance = np.empty((len(clusters), len(x)))
    sizes = np.empty(len(clusters))
    for j, c in enumerate(clusters):
        members = np.sort(x[labels == c])
        prefix = np.concatenate([[0.0], np.cumsum(members)])
        k = np.searchsorted(members, x, side="right")
        below = x * k - prefix[k]
        above = (prefix[-1] - prefix[k]) - x * (len(members) - k)
        mean_distance[j] = below + above
        sizes[j] = len(members)
    index = np.searchsorted(clusters, labels)
    own_size = sizes[index]
    # a(i): mean distance to the other members of its own cluster; b(i): to the nearest other cluster.
    a = mean_distance[index, np.arange(len(x))] / np.maximum(own_size - 1, 1)
    other = mean_distance / sizes[:, None]
    other[index, np.arange(len(x))] = np.inf
    b = other.min(axis=0)
    s = np.where(own_size > 1, (b - a) / np.maximum(np.maximum(a, b), 1e-300), 0.0)
    return float(np.clip(np.mean(s), -1.0, 1.0))  # rounding can push a perfect split past 1


def intervals(positions) -> np.ndarray:
    """Differences between neighbouring positions (sorted)."""
    p = np.sort(np.asarray(positions))
    return np.diff(p)


def most_common_intervals(positions, top: int = 3) -> list[tuple[float, float]]:
    """The most common intervals between neighbouring abnormal positions, as ``(interval, share)`` pairs,
    most common first (the paper's rule reads the property off the first)."""
    gaps = intervals(positions)
    gaps = gaps[gaps > 0]
    if len(gaps) == 0:
        return []
    counted = Counter(gaps.tolist())
    total = sum(counted.values())
    ranked = sorted(counted.items(), key=lambda item: (-item[1], item[0]))
    return [(float(value) if not float(value).is_integer() else int(value), count / total)
            for value, count in ranked[:top]]
