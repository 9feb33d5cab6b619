"""The checks nvme_qemu.sh runs inside the QEMU guest, against QEMU's emulated NVMe controller.

One Python process runs them all (under TCG each interpreter start costs 20-100 s): the CLI through
``ftlscope.cli.main``, the health log through the engine. Prints one ``CHECK name PASS|FAIL detail`` line each.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import time
import traceback

DEV = "/dev/nvme0n1"
MiB = 1 << 20


def check(name: str, ok: bool, detail: str = "") -> None:
    print(f"CHECK {name} {'PASS' if ok else 'FAIL'} {detail}".rstrip(), flush=True)


def cli(*args: str) -> tuple[int, str, str]:
    from ftlscope.cli import main

    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(args))
        except SystemExit as exc:
            rc = int(exc.code or 0)
    print(f"GUEST ftlscope {' '.join(args)}: exit {rc} in {time.monotonic() - started:.1f} s", flush=True)
    return rc, out.getvalue(), err.getvalue()


def _whole(value):
    """A counter as a whole number (nvme-cli may print 128-bit counters as floats), or the value itself."""
    try:
        return round(float(value))
    except (TypeError, ValueError, OverflowError):
        return value


def health_against_nvme_cli() -> None:
    from ftlscope import _native

    snapshot = json.loads(_native.health_snapshot(DEV))
    smart = json.loads(subprocess.run(["nvme", "smart-log", "/dev/nvme0", "-o", "json"], check=True,
                                      capture_output=True, text=True).stdout)
    if not snapshot.get("available"):
        check("health-available", False, snapshot.get("reason", ""))
        return
    sample = snapshot["sample"]
    print(f"GUEST nvme smart-log: {json.dumps(smart)}", flush=True)
    print(f"GUEST ftlscope health: {json.dumps(sample)}", flush=True)
    # nvme-cli reports the temperature in kelvin and the data units in thousands of 512-byte units.
    kelvin = None if sample["temperature_c"] is None else sample["temperature_c"] + 273.15
    pairs = {
        "critical_warning": (sample["critical_warning"], smart["critical_warning"]),
        "temperature_k": (kelvin, smart["temperature"]),
        "available_spare_pct": (sample["available_spare_pct"], smart["avail_spare"]),
        "percentage_used": (sample["percentage_used"], smart["percent_used"]),
        # nvme-cli prints its 128-bit counters as strings.
        "host_bytes_read": (sample["host_bytes_read"], int(smart["data_units_read"]) * 512_000),
        "host_bytes_written": (sample["host_bytes_written"], int(smart["data_units_written"]) * 512_000),
        "power_on_hours": (sample["power_on_hours"], smart["power_on_hours"]),
        "unsafe_shutdowns": (sample["unsafe_shutdowns"], smart["unsafe_shutdowns"]),
        "media_errors": (sample["media_errors"], smart["media_errors"]),
    }
    for field, (ours, theirs) in pairs.items():
        check(f"health-{field}", _whole(ours) == _whole(theirs), f"ftlscope {ours} nvme-cli {theirs}")
    check("ocp-c0-absent", snapshot["source"] == "nvme-smart", f"source {snapshot['source']}")


def main() -> int:
    rc, out, err = cli("devices")
    from ftlscope.devices import list_block_devices

    listed = [d for d in list_block_devices() if d.path == DEV]
    # The table may shorten the path to fit its width; the model column names the controller.
    check("devices", rc == 0 and "QEMU NVMe" in out and len(listed) == 1,
          f"{listed[0].model if listed else 'not listed'}, {listed[0].size_bytes if listed else 0} B")

    rc, out, err = cli("run", DEV, "--rw", "randread", "--ops", "200", "--quiet", "--json", "/run/read.json")
    summary = json.load(open("/run/read.json")) if rc == 0 else {}
    check("read-run", rc == 0 and summary.get("read", {}).get("ops") == 200
          and summary["target"]["kind"] == "block_device", err.strip()[-200:])

    rc, out, err = cli("run", DEV, "--rw", "randwrite", "--ops", "10", "--quiet")
    check("write-refused-without-destructive", rc == 2 and "--destructive" in err, err.strip()[-200:])

    rc, out, err = cli("run", DEV, "--rw", "randwrite", "--qd", "4", "--ops", "500", "--size", "16m",
                       "--destructive", DEV, "--verify", "--quiet", "--json", "/run/write.json")
    summary = json.load(open("/run/write.json")) if rc == 0 else {}
    verify = summary.get("verify", {})
    check("write-run-verified", rc == 0 and summary.get("write", {}).get("ops") == 500
          and verify.get("mismatch_count") == 0 and verify.get("ok", 0) > 0,
          f"verify ok {verify.get('ok')} mismatches {verify.get('mismatch_count')} {err.strip()[-200:]}")

    limit = int(open("/sys/block/nvme0n1/queue/write_zeroes_max_bytes").read())
    rc, out, err = cli("run", DEV, "--rw", "writezeroes", "--bs", "1m", "--ops", "16", "--size", "16m",
                       "--destructive", DEV, "--quiet")
    with open(DEV, "rb") as f:
        zeroed = f.read(16 * MiB)
    check("write-zeroes", rc == 0 and limit > 0 and zeroed == bytes(16 * MiB),
          f"write_zeroes_max_bytes {limit} {err.strip()[-200:]}")

    health_against_nvme_cli()

    from ftlscope.nvme_admin import controller_reset

    ns = controller_reset(DEV)
    check("controller-reset", ns > 0, f"{ns / 1e6:.0f} ms to the first read")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:
        traceback.print_exc()
        check("guest-script", False, "raised; see the console log")
        sys.exit(1)
