"""bench/fidelity_seeds.py's seed list and its one-line refusal of a bad one (the measuring itself is
bench/fidelity.py's, tested in test_fidelity_data.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def fidelity_seeds():
    spec = importlib.util.spec_from_file_location("fidelity_seeds", BENCH / "fidelity_seeds.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_seeds_are_ranges_and_lists(fidelity_seeds):
    assert fidelity_seeds.parse_seeds("1-4") == [1, 2, 3, 4]
    assert fidelity_seeds.parse_seeds("1,4,6") == [1, 4, 6]
    assert fidelity_seeds.parse_seeds("1-3,9") == [1, 2, 3, 9]


@pytest.mark.parametrize("seeds", ["a-b", "1..4", "-1"])
def test_a_bad_seed_list_is_refused_in_one_line(seeds):
    done = subprocess.run([sys.executable, str(BENCH / "fidelity_seeds.py"), "--seeds", seeds],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--seeds" in done.stderr.strip().splitlines()[-1]
