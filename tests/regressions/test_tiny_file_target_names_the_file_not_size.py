"""A 2-byte existing file as target once got "--size: 2 B is not a multiple of 4 KiB; round it (e.g. 0)"
although no --size was given: the error names the file, its size and the 4 KiB minimum, and how to go on."""

import pytest

from ftlscope.cli import main

pytestmark = pytest.mark.usefixtures("state_home")


def test_a_two_byte_file_is_too_small(scratch, capsys):
    target = scratch / "tiny.img"
    target.write_bytes(b"ab")
    assert main(["run", str(target), "--ops", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert err.startswith("ftlscope: error: ")
    assert f"{target} is 2 B, smaller than the 4 KiB a run needs" in err
    assert "--size" in err and "e.g. 0" not in err
    assert target.read_bytes() == b"ab"  # refused before the file was touched


def test_a_file_not_a_whole_number_of_blocks_says_what_to_extend_it_to(scratch, capsys):
    target = scratch / "odd.img"
    target.write_bytes(b"x" * 5000)
    assert main(["run", str(target), "--ops", "1"]) == 2
    err = capsys.readouterr().err
    assert f"{target} is 5,000 B, not a multiple of 4 KiB; give --size 8192" in err
