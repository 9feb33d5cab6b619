"""Little's law, L = λ · W: with ``L`` requests always in flight (a closed loop at queue depth L) and a mean
response time ``W``, the throughput must be λ = L / W. Seed 001 §5.2 checks it per QD ("QD 32: predicted
IOPS ≈ 32 / 0.0002389 ≈ 134k; observed 133.8k"); seed 004 invokes it for its deep queues. A large error says
the queue was not kept full (a host-side bottleneck, a submission limit) or latency was measured wrongly.
"""

from __future__ import annotations

import numpy as np


def predicted_iops(in_flight, mean_latency_s):
    """λ = L / W: the IOPS that ``in_flight`` outstanding requests with ``mean_latency_s`` must give."""
    return np.asarray(in_flight, dtype=float) / np.asarray(mean_latency_s, dtype=float)


def error_pct(in_flight, mean_latency_s, observed_iops):
    """Signed error of the prediction against the observation, in % of the observation (positive: Little's
    law predicts more than was measured)."""
    observed = np.asarray(observed_iops, dtype=float)
    return (predicted_iops(in_flight, mean_latency_s) - observed) / observed * 100.0


def max_abs_error_pct(in_flight, mean_latency_s, observed_iops) -> float:
    """The worst point's |error| in %, NaN points ignored (NaN when there is none)."""
    errors = np.abs(error_pct(in_flight, mean_latency_s, observed_iops))
    errors = errors[np.isfinite(errors)]
    return float(errors.max()) if errors.size else float("nan")
