"""A file system that fails after the checks passed (full, unmounted) ends any command with one line and exit 1,
not a traceback (issue 14, defect 2: 22 tracebacks)."""

from __future__ import annotations

import errno

from ftlscope import cli


def test_an_oserror_late_in_a_command_is_one_line_with_exit_1(monkeypatch, capsys):
    def fails(args):
        raise OSError(errno.ENOSPC, "No space left on device", "/mnt/full/report.html")

    monkeypatch.setattr(cli, "cmd_sim_presets", fails)
    assert cli.main(["sim", "presets"]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == ["ftlscope: error: /mnt/full/report.html: No space left on device; the files written before "
                     "it are kept"]
