"""What a gpulint command imports, seen in a fresh interpreter (modules are counted, not timed).

:func:`imported_modules` runs ``gpulint.cli.main(args)`` in a new process and returns every
module it imported. The answer for the same arguments is kept for the test session: the
import-budget tests of several modules ask for the same one-file lint, and each new
interpreter costs a start-up.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_PROBE = """
import json, sys
from gpulint.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


@functools.cache
def imported_modules(*args: str) -> frozenset[str]:
    """Every module ``gpulint ARGS`` imported (run in the repository root)."""
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.stderr.strip(), proc.stdout
    return frozenset(json.loads(proc.stderr.strip().splitlines()[-1]))
