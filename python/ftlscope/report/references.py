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

# Short titles as experiments cite them in their ``source``, findings and parameters (what a user reads in
# `bench --list`, docs/experiments.md and the JSON results), in the order of REFERENCES.
SHORT_TITLES = (
    "“What does the Flash Translation Layer do?”",
    "“SSD Performance Profiling”",
    "“Solid State Disks vs Magnetic Disks”",
    "“Fantastic SSD Internals”",
    "“SSD Performance Report”",
)
# The report shows them as the reference numbers above ("[2] §5"); "seed 001" is the documents' file
# numbering, still read so that records written before the titles replaced it render alike.
# A title already followed by its number (the running-text forms above) is left alone.
_CITED = re.compile("|".join([r"seed 00(?P<seed>\d)(?:'s)?"] + [re.escape(t) + r"(?! \[\d\])" for t in SHORT_TITLES]))


def cite(text: str) -> str:
    """``“SSD Performance Profiling” §5`` (or ``seed 001 §5``) -> ``[2] §5``: the titles the experiments
    cite as the reader's reference numbers."""
    def number(m: re.Match) -> str:
        if m.group("seed") is not None:
            return f"[{int(m.group('seed')) + 1}]"
        return f"[{SHORT_TITLES.index(m.group(0)) + 1}]"
    return _CITED.sub(number, text or "")
