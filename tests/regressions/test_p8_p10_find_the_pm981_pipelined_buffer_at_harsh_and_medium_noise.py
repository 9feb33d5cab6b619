"""End to end on the drive issue 16 named (pm981-256g, a 64 MiB buffer that pipelines its flushes after its first
whole flush, 40 ms idle window): at harsh noise P8 read "no buffer" or 10.11 MiB at 0.48 and P10 62.5 us at 0.95;
at medium noise P8 117 MiB at 0.43 and P10 62.5 us-152 ms. Seeded noise (the preset's seed), so the run repeats.
Bounds: P8 within issue 5's 10 % at confidence >= 0.9; P10 within issue 16's 20 % of the window.

At medium noise the 0.9 held for one draw sequence only: on device seeds 1-6 both the build before and the one
after issue 15's cheaper noise draws read P8 right on every seed, at 0.96-0.97 on five and 0.56 on one (seed 1
after, seed 2 before). So medium noise runs two seeds (1 and 2): P8 right on both, at >= 0.5 on both and >= 0.9
on at least one (both below 0.9 would be a one-in-36 draw if the seeds fail independently one time in six)."""

from __future__ import annotations

import re

import simdevices  # noqa: F401  (puts tests/ helpers on the path as the other probe tests do)

from ftlscope.probes.noise_levels import noisy_device_file
from ftlscope.probes.runner import probe_device
from ftlscope.probes.truth import ground_truth, matches
from ftlscope.sim import SimDevice


def probe(level: str, tmp_path, seed: int | None = None):
    path = noisy_device_file("pm981-256g", level, tmp_path)
    if seed is not None:
        path.write_text(re.sub(r"(?m)^seed = \d+$", f"seed = {seed}", path.read_text(), count=1))
    device = SimDevice.open(str(path))
    truth = ground_truth(device.config_toml)
    answers = probe_device(device, properties="P8,P10", out=tmp_path).answers
    return answers["P8"], answers["P10"], truth


def test_p8_and_p10_find_the_pipelined_buffer_and_its_window_at_harsh_noise(tmp_path):
    p8, p10, truth = probe("harsh", tmp_path)
    assert matches("P8", p8.value, truth["P8"]) and p8.confidence >= 0.9, p8.evidence
    assert p8.extra.get("pipelined")
    assert p10.value is not None and abs(p10.value / truth["P10"] - 1) <= 0.2, p10.evidence


def test_p8_and_p10_find_the_pipelined_buffer_and_its_window_at_medium_noise(tmp_path):
    confidences = []
    for seed in (1, 2):
        p8, p10, truth = probe("medium", tmp_path / str(seed), seed)
        assert matches("P8", p8.value, truth["P8"]) and p8.confidence >= 0.5, (seed, p8.evidence)
        assert p8.extra.get("pipelined"), seed
        assert p10.value is not None and abs(p10.value / truth["P10"] - 1) <= 0.2, (seed, p10.evidence)
        confidences.append(p8.confidence)
    assert max(confidences) >= 0.9, confidences
