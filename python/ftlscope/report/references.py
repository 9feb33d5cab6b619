"""The five documents ftlscope implements, as the report's References section lists them: what the report
cites, it cites by title or by the number here ([1] ... [5])."""

from __future__ import annotations

import re

REFERENCES = (
    "“What does the Flash Translation Layer do? Exploring Modern NVMe SSD Performance Characteristics”, "
    "Bachelor's thesis, KIT, 2025",
    "“SSD Performance Profiling”, a report built on fio",
    "“Solid State Disks vs Magnetic Disks: Making the right choice”, Master's thesis, University of Oslo, 2009",
    "“Fantastic SSD Internals and How to Learn and Use Them”, SYSTOR '22",
    "“SSD Performance Report”, fio on a Kingston NV2, 2024",
)
# Short titles for running text.
FTL_THESIS, PROFILING, SSD_VS_HDD, FANTASTIC, DEEP_QUEUES = (
    "“What does the Flash Translation Layer do?” [1]",
    "“SSD Performance Profiling” [2]",
    "“Solid State Disks vs Magnetic Disks” [3]",
    "“Fantastic SSD Internals and How to Learn and Use Them” [4]",
    "“SSD Performance Report” [5]",
)

# An experiment's ``source`` field names the documents by their file numbers ("seed 001 §5"); the
# report shows them as the reference numbers above ("[2] §5").
_SEED = re.compile(r"seed 00(\d)(?:'s)?")


def cite(text: str) -> str:
    """``seed 001 §5`` -> ``[2] §5``: the internal file numbering as the reader's reference numbers."""
    return _SEED.sub(lambda m: f"[{int(m.group(1)) + 1}]", text or "")
