"""Runs the embeval command of a checkout, counting how often a classification protocol prepares its
samples (features and folds): `python bench/count_prepare.py CHECKOUT COUNT_FILE embeval-args...`.
The count (one integer) is appended to COUNT_FILE when the command ends. bench/sweep.py uses it to
show how much preparation a sweep repeats."""

import atexit
import sys

checkout, count_file, *arguments = sys.argv[1:]
sys.path.insert(0, checkout)

from embeval.evaluate import classify  # noqa: E402

calls = [0]
prepare = classify.prepare


def counted(*args, **kwargs):
    calls[0] += 1
    return prepare(*args, **kwargs)


classify.prepare = counted
atexit.register(lambda: open(count_file, "a").write(f"{calls[0]}\n"))
sys.argv = ["embeval", *arguments]
from embeval.cli import main  # noqa: E402

main()
