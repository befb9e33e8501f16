"""Print the checksum table (data/checksums.tsv) of SentEval's layout from a data folder.

Usage (from the repository root): PYTHONPATH=. python scripts/record_checksums.py DATA > data/checksums.tsv
Records every file found under each data set's folder; files that are not there (SNLI train,
COCO, probing) get no record, and `embeval data verify` says so.
"""

import sys

from embeval.datasets.sources import load_sources
from embeval.datasets.verify import record

HEADER = (
    "# SentEval's data layout: path relative to the data folder, size in bytes, sha256.\n"
    "# Made by scripts/record_checksums.py from a folder produced by SentEval's own download script."
)

if __name__ == "__main__":
    print(HEADER)
    print("\n".join(record(sys.argv[1], load_sources().values())))
