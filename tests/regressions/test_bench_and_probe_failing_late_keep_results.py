"""A bench or probe whose --out fails after the measurement (the disk filled up) keeps every result in a new
temporary directory and says where in one line (exit 1), as run does (issue 14: late write failures of
bench/probe kept their files in --out only, as far as they got)."""

from __future__ import annotations

import errno
import json
import re
from pathlib import Path

from ftlscope import cli
from ftlscope.experiments import suite
from ftlscope.probes import runner


def _fail_first_write_under(monkeypatch, module, directory: Path) -> None:
    """The module's write_json fails (ENOSPC) for files under ``directory``, and works elsewhere."""
    real = module.write_json

    def write_json(path, data):
        if Path(path).is_relative_to(directory):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, data)

    monkeypatch.setattr(module, "write_json", write_json)


def _kept(stderr: str) -> Path:
    match = re.search(r"the results are kept in (\S+)/", stderr)
    assert match, stderr
    return Path(match.group(1))


def test_a_bench_whose_out_fills_up_keeps_its_results_elsewhere(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    _fail_first_write_under(monkeypatch, suite, out)
    code = cli.main(["bench", "sim:consumer-tlc-dram", "qd1-baseline", "--out", str(out), "--quiet",
                     "--param", "runtime=20ms", "--param", "span=64MiB"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.count("\n") == 0, err
    assert "No space left on device" in err and str(out) in err
    kept = _kept(err)
    assert kept.name == "qd1-baseline" and not kept.is_relative_to(out)
    assert (kept / "results.csv").stat().st_size > 0
    assert json.loads((kept / "findings.json").read_text())
    assert json.loads((kept / "experiment.json").read_text())["completed"] is True
    assert any((kept / "raw").rglob("*.summary.json"))  # the runs' raw files came along


def test_a_probe_whose_out_fills_up_keeps_its_answers_elsewhere(tmp_path, monkeypatch, capsys):
    out = tmp_path / "probe-out"
    _fail_first_write_under(monkeypatch, runner, out)
    code = cli.main(["probe", "sim:consumer-tlc-dram", "--properties", "P7", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 1, err
    assert err.splitlines()[-1].startswith("ftlscope: error: cannot write") and "kept in" in err
    kept = _kept(err)
    assert "P7" in json.loads((kept / "properties.json").read_text())["properties"]
    assert (kept / "properties.csv").exists() and (kept / "raw").is_dir()

