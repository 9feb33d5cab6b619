"""The notation work (issue 16) made the report and ``compare`` import the property legend from the probes
package, which loaded every probe, the targets and the engine whenever a report was rendered: reports read
stored results and analysis, never the code that drives a device. The legend is text only and lives in
``ftlscope.analysis.property_marks``."""

from __future__ import annotations

import subprocess
import sys


def test_rendering_modules_load_neither_the_probes_nor_the_engine():
    code = ("import sys, ftlscope.report.render, ftlscope.report.compare; "
            "print(sorted(m for m in sys.modules if m.startswith(('ftlscope.probes', 'ftlscope.targets')) "
            "or m == 'ftlscope._native'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
