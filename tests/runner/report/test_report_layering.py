"""The report layer reads only the data handed to it: importing every report module
pulls in nothing of the load generator, the backends, the store or the workload
catalogue (docs/architecture.md, import rules)."""
from __future__ import annotations

import json
import subprocess
import sys

FORBIDDEN = ("runner.load", "runner.backends", "runner.store", "runner.catalogue.workloads", "runner.load.registry",
             "runner.spec.model", "dashboard")


def test_report_modules_import_no_runner_internals():
    code = ("import json, sys\n"
            "import runner.report.data, runner.report.tables, runner.report.fmt, runner.report.stats\n"
            "import runner.report.csv, runner.report.html, runner.report.json, runner.report.md\n"
            "import runner.report.rst, runner.report.text\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('runner', 'dashboard')))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    loaded = json.loads(out.stdout)
    bad = [m for m in loaded if m.startswith(FORBIDDEN)]
    assert bad == [], f"runner.report pulled in {bad}"
    assert "runner.report.tables" in loaded
