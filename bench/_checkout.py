"""Imported first by the bench scripts that import embeval: the code a benchmark measures is its own
clone's, whatever folder it is run from (`python PATH/TO/CLONE/bench/SCRIPT.py`), rather than an
installed embeval. PYTHONPATH, when set, still comes first: the `--against-tree` and `--before` arms
run another checkout's code that way."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    given = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path.insert(1 + len(given), str(ROOT))  # after the script's folder and PYTHONPATH's entries
