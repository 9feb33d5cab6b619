"""consumer-tlc-hmb (Kingston NV2) against "SSD Performance Report" Tables 5-12: at QD 64 a mix's reads took about
as long in the 5:5 mix as in the 7:3 mix (128 KiB 1238 against 1270 us, 32 KiB 646 against 763 us) while carrying
0.57-0.64x the reads. The model's reads went before the programs on the channel bus at once (`read_bus_shared`),
so they never waited for the data a mix's flush had booked there: the 5:5 reads were too fast (32 KiB -23 %,
128 KiB -49 % over eight noise seeds) and the 32 KiB 7:3 writes too slow (+21 %). Issue 15: `nand.read_bus_wait`
(the NV2: 200us) lets a read wait that long behind the program transfers booked before it. Each cell on its own
sequentially filled 1 GiB span, simulated time, the bench's fixed seeds."""

from __future__ import annotations

from ftlscope.fidelity import measure, published
from ftlscope.sim import SimDevice

SETTINGS = measure.Settings(runtime="1s", warmup="500ms")
PRESET = "consumer-tlc-hmb"


def _cell(bs: str, mix: str, opener=None) -> dict[str, float]:
    fidelity = measure.Fidelity(SETTINGS, device_opener=opener)
    return fidelity.metrics(PRESET, "steady", published.report_params(bs, mix, 64))


def test_qd64_mix_reads_wait_for_the_program_data_booked_on_their_bus(preset_with):
    first = preset_with(PRESET, "read_bus_wait", '"0us"')
    with_wait = _cell("32k", "5:5")
    at_once = _cell("32k", "5:5", lambda _name: SimDevice.open(first))
    # Published 646 us; reads that go first at once were ~23 % faster than that.
    assert with_wait["read.lat_mean"] > 1.15 * at_once["read.lat_mean"], (with_wait, at_once)
    assert 550e3 < with_wait["read.lat_mean"] < 750e3, with_wait["read.lat_mean"]  # ns
    # Reads still go before the writes (1384 us published): the wait is bounded.
    assert with_wait["read.lat_mean"] < with_wait["write.lat_mean"], with_wait
