"""Result records: plain JSON (written atomically) and the terminal table."""

import json
import math

import numpy as np

from embeval.formats import atomic

FORMAT = "embeval-results"
FORMAT_VERSION = 1
# Every timing figure of a record sits under one of these keys, and nothing else does: two runs on
# the same inputs and configuration differ only there (on the CPU).
TIMING_KEYS = frozenset({"seconds"})


def plain(value):
    """JSON-ready copy: numpy scalars and arrays to Python, NaN and Inf to None."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    return value


def without_timing(value):
    """A copy of a record (or any part of it) with every TIMING_KEYS entry removed, at any depth."""
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    return value


def dumps(record):
    return json.dumps(plain(record), indent=1, allow_nan=False) + "\n"


def write_json(path, record):
    """Write the record to path atomically (temporary file, then rename)."""
    atomic.write_text(path, dumps(record))


def _pct(x):
    return "  n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:5.2f}"


def _num(x, fmt="{:5.2f}"):
    return "  n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else fmt.format(x)


def _interval(ci, path, scale=100.0):
    """' [low, high]' of a figure's bootstrap interval, in the table's units (nothing when absent)."""
    found = (ci or {}).get(path)
    if not found or found.get("low") is None or found.get("high") is None:
        return ""
    return f" [{scale * found['low']:.2f}, {scale * found['high']:.2f}]"


def _sts_rows(r, ci=None, prefix="", label="cosine"):
    rows = []
    for coef in ("spearman", "pearson"):
        a = r["all"][coef]
        rows.append(
            (
                f"{label} {coef.capitalize()} x100 mean | wmean | pooled",
                f"{_pct(a['mean'])} | {_pct(a['wmean'])} | {_pct(a['pooled'])}"
                + _interval(ci, f"{prefix}all.{coef}.pooled"),
            )
        )
    return rows


def _accuracy_row(r, ci, prefix="", label="accuracy % dev / test"):
    text = f"{_num(r['devacc'])} / {_num(r['acc'])}" + _interval(ci, f"{prefix}acc", 1.0)
    if "f1" in r:
        text += f"  (F1 {_num(r['f1'])}{_interval(ci, prefix + 'f1', 1.0)})"
    return label, text


def summary_rows(kind, r, ci=None):
    """(metric label, value text) lines for one task's results; ci: the entry's interval figures
    ({path: {value, low, high}}), shown as [low, high] after the figures that have one."""
    rows = []
    normalized = r.get("normalized") if isinstance(r.get("normalized"), dict) else None
    if kind == "sts":
        rows = _sts_rows(r, ci)
        if normalized:
            rows += _sts_rows(normalized, ci, "normalized.", f"{normalized['method']} cosine")
        return rows
    if "cosine" in r:
        c = r["cosine"]
        rows.append(
            (
                "cosine Spearman | Pearson x100 (test)",
                f"{_pct(c['spearman'])}{_interval(ci, 'cosine.spearman')} | {_pct(c['pearson'])}",
            )
        )
    if normalized and "cosine" in normalized:
        c = normalized["cosine"]
        rows.append(
            (
                f"{normalized['method']} cosine Spearman | Pearson x100 (test)",
                f"{_pct(c['spearman'])}{_interval(ci, 'normalized.cosine.spearman')} | {_pct(c['pearson'])}",
            )
        )
    if "mse" in r:
        rows.append(
            (
                "Spearman | Pearson x100, MSE (test)",
                f"{_pct(r['spearman'])} | {_pct(r['pearson'])}{_interval(ci, 'pearson')}, {_num(r['mse'], '{:.3f}')}",
            )
        )
        rows.append(("dev Pearson x100", _pct(r["devpearson"])))
    if kind == "retrieval" and "acc" in r:
        for direction, label in (("i2t", "image->text"), ("t2i", "text->image")):
            m = r["acc"][direction]
            rows.append(
                (
                    f"{label} R@1 | R@5 | R@10, medr",
                    f"{_num(m['r1'])} | {_num(m['r5'])} | {_num(m['r10'])}, {_num(m['medr'], '{:.1f}')}",
                )
            )
        if ci and "acc.mean_recall" in ci:
            rows.append(
                ("mean of the six R@K %", _num(ci["acc.mean_recall"]["value"]) + _interval(ci, "acc.mean_recall", 1.0))
            )
        rows.append(("dev score (R@1+5+10 both ways, max 600)", _num(r["devacc"])))
    elif "acc" in r:
        classifiers = [c for c in ("logreg", "mlp") if isinstance(r.get(c), dict)]
        if classifiers:
            rows += [_accuracy_row(r[c], ci, f"{c}.", f"{c} accuracy % dev / test") for c in classifiers]
        else:
            rows.append(_accuracy_row(r, ci))
    return rows


def _entry_rows(entry):
    rows = summary_rows(entry["kind"], entry["results"], (entry.get("ci") or {}).get("figures"))
    norm = entry.get("normalize")
    if norm and (entry["kind"] != "sts" or norm.get("requested") == "tune"):
        rows.append(("normalization", norm["method"] + (" (tuned on dev)" if norm.get("requested") == "tune" else "")))
    geo = entry.get("geometry")
    if geo:
        rows.append(
            (
                "alignment | uniformity (lower is better)",
                f"{_num(geo['alignment'], '{:.3f}')} | {_num(geo['uniformity'], '{:.3f}')}",
            )
        )
    return rows


def _block(record, tasks):
    scored = [(name, record["tasks"][name]) for name in tasks if name in record["tasks"]]
    lines = []
    if scored:
        width = max(len(n) for n, _ in scored) + 2
        labels = [label for name, t in scored for label, _ in _entry_rows(t)]
        lw = max([len(x) for x in labels] + [6]) + 2
        lines.append(f"{'task':<{width}}{'metric':<{lw}}score")
        lines.append("-" * (width + lw + 24))
        for name, t in scored:
            for i, (label, value) in enumerate(_entry_rows(t)):
                lines.append(f"{name if i == 0 else '':<{width}}{label:<{lw}}{value}")
    return lines


def _dimension(record):
    dim = record.get("vectors", {}).get("dim")
    return dim if dim is not None else sorted({t["vectors"]["dim"] for t in record["tasks"].values()}) or None


def table(record, tasks):
    """The terminal table: one block of lines per scored task, then what was skipped."""
    lines = []
    if record.get("tasks"):
        line = f"vectors: {record.get('vectors', {}).get('file', '?')} (dimension {_dimension(record)})"
        boot = record.get("config", {}).get("bootstrap")
        if boot:
            line += f"; [low, high]: 95% interval, bootstrap of the test items ({boot} resamples)"
        lines.append(line)
    lines += _block(record, tasks)
    base = record.get("baseline")
    if base and base.get("tasks"):
        lines.append("")
        lines.append(f"baseline: {base['encoder']} ({base['dim']}-d), for context")
        lines += _block(base, tasks)
    for reason, names in record.get("skipped", {}).items():
        if names:
            lines.append(f"skipped ({reason.replace('_', ' ')}): {', '.join(names)}")
    for name, note in record.get("partial", {}).items():
        lines.append(f"partial: {name}: {note}")
    return "\n".join(lines)
