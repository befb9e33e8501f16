"""Print how much of the installed mteb `embeval ... --mteb` scores: mteb's text tasks by type, and
its benchmarks scored whole, in part (--skip-unsupported) or not at all. docs/mteb-by-name.md's
figures come from this (tests/test_mteb_coverage.py checks them against the installed mteb).

Usage: PYTHONPATH=. python scripts/mteb_coverage.py   (from the repository root; needs mteb)
"""

import logging
import warnings

from embeval.tasks.mteb_coverage import coverage, lines

if __name__ == "__main__":
    warnings.simplefilter("ignore")  # mteb's notes on beta tasks
    logging.disable(logging.WARNING)
    print("\n".join(lines(coverage())))
