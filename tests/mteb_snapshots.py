"""Dataset copies in Hugging Face's layout, as `hf download ORG/NAME --repo-type dataset
--local-dir DIR/ORG/NAME` leaves them (a README.md whose YAML names each config's data files, the files
as JSON lines or parquet, and the revision recorded under .cache/huggingface/download), and the vectors
both arms score: hashed word counts (many exact ties between texts and between scores)."""

import json
import zlib
from pathlib import Path

import numpy as np

DIM = 16


def hashed_counts(text, dim=DIM):
    """A text's word counts hashed into `dim` buckets (crc32: the same in every process)."""
    vector = np.zeros(dim)
    for word in text.lower().split():
        vector[zlib.crc32(word.encode("utf-8")) % dim] += 1.0
    if not vector.any():
        vector[0] = 1.0  # a text without words still has a direction
    return vector


def encode(sentences):
    return np.stack([hashed_counts(s) for s in sentences]) if sentences else np.zeros((0, DIM))


def write_snapshot(root, dataset, revision, configs, form="jsonl"):
    """Write DIR/ORG/NAME: configs {config name: {split: [row dicts]}}, as JSON lines, gzipped JSON
    lines or parquet (`form`: "jsonl", "jsonl.gz" or "parquet"), and the revision
    as `hf download --local-dir` records it (none when `revision` is None)."""
    import gzip

    folder = Path(root) / dataset
    lines = ["---", "configs:"]
    for config, splits in configs.items():
        lines += [f"- config_name: {config}", "  data_files:"]
        for split, rows in splits.items():
            relative = f"data/{config}/{split}.{form}"
            path = folder / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            text = "".join(json.dumps(r) + "\n" for r in rows)
            if form == "jsonl":
                path.write_text(text, encoding="utf-8")
            elif form == "jsonl.gz":
                path.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
            else:
                import pyarrow as pa
                import pyarrow.parquet as pq

                pq.write_table(pa.Table.from_pylist(rows), path)
            lines += [f"  - split: {split}", f"    path: {relative}"]
    lines.append("---")
    (folder / "README.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if revision is not None:
        record = folder / ".cache" / "huggingface" / "download" / "README.md.metadata"
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(f"{revision}\netag\n0\n", encoding="utf-8")
    return folder


def words(rng, n, vocabulary=12):
    """n short texts over a small vocabulary (repeated texts and words: ties)."""
    return [" ".join(f"w{rng.integers(vocabulary)}" for _ in range(rng.integers(1, 5))) for _ in range(n)]
