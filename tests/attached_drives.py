"""What the tests of experiments on attached simulated drives (``ftlscope sim attach``) check afterwards: which
loop devices a run attached, and whether one is still an ftlscope drive."""

from __future__ import annotations

import os
import time
from pathlib import Path


def attached_devices(notes: list[str]) -> list[str]:
    """The loop devices an experiment's notes say it attached."""
    return [n.split("attached as ")[1].split()[0] for n in notes if "attached as /dev/loop" in n]


def still_ours(device: str) -> bool:
    """Whether ``device`` is still bound to an ftlscope attach server's file (other sessions on this machine
    make and remove their own loop devices meanwhile, so the whole list is not compared)."""
    from ftlscope.attach_state import attachments

    backing = Path(f"/sys/block/{os.path.basename(device)}/loop/backing_file")
    for _ in range(50):  # the kernel clears an autoclear loop device just after its last opener has gone
        held = backing.exists() and "ftlscope" in backing.read_text()
        if not (held or any(a.alive and a.device == device for a in attachments())):
            return False
        time.sleep(0.1)
    return True
