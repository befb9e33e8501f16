"""Loaded task data: splits of samples (sentence texts, labels or scores) in file order."""

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass
class Split:
    """One split (or STS subset) of a task, in the order of its data files.

    `a` holds the first (or only) sentence of each sample, `b` the second for pair tasks.
    `y` holds integer labels, float scores, or (COCO) each caption's image index.
    `sort_label` is what SentEval sorts by after the token counts when it differs from `y`
    (SNLI sorts by the raw label string). `images` holds COCO's per-image features.
    """

    name: str
    a: list[str]
    y: np.ndarray
    b: list[str] | None = None
    sort_label: list | None = None
    images: np.ndarray | None = None

    def __len__(self):
        return len(self.a)

    def sentences(self):
        """The split's sentence slots: every first sentence, then every second one."""
        return self.a if self.b is None else self.a + self.b


@dataclass
class TaskData:
    """Every split of one task, plus label names where labels are categorical. `spaced`: every
    sentence is its tokens joined by single spaces (SentEval's files; task files with whitespace
    tokenization), so a sentence's token count is its spaces plus one."""

    name: str
    splits: dict[str, Split]
    classes: list[str] | None = None
    files: Sequence[str | Path] = field(default_factory=list)
    spaced: bool = True

    def sentences(self):
        """All sentence slots of the task, split by split (the export order before dedup)."""
        out = []
        for split in self.splits.values():
            out.extend(split.sentences())
        return out


def token_count(text):
    """Tokens of a sentence whose tokens are joined by single spaces."""
    return 0 if not text else text.count(" ") + 1


def whitespace_token_count(text):
    """Tokens of a sentence as written: its parts between runs of whitespace."""
    return len(text.split())


def senteval_order(split, rule, spaced=True):
    """The permutation SentEval applies to a split before building folds (a stable sort).

    rule 'single': (tokens, label); 'pair': (tokens of A, tokens of B, label or score);
    'snli': (tokens of B, tokens of A, raw label string); None: file order. spaced: the sentences
    are tokens joined by single spaces (else their tokens are counted on any whitespace).
    """
    n = len(split)
    if rule is None:
        return np.arange(n)
    count = token_count if spaced else whitespace_token_count
    label = split.sort_label if split.sort_label is not None else split.y.tolist()
    ta = [count(s) for s in split.a]
    if rule == "single":
        keys = list(zip(ta, label))
    else:
        tb = [count(s) for s in split.b]
        keys = list(zip(ta, tb, label)) if rule == "pair" else list(zip(tb, ta, label))
    return np.array(sorted(range(n), key=keys.__getitem__), dtype=np.int64)


def split_rows(split, row_of):
    """Row indices (into the task's sentence table) of each sample's first and second sentence."""
    ia = np.fromiter((row_of[s] for s in split.a), dtype=np.int64, count=len(split.a))
    ib = None if split.b is None else np.fromiter((row_of[s] for s in split.b), dtype=np.int64, count=len(split.b))
    return ia, ib


# Splits from a user's tabular files (embeval.tasks.tabular): texts, labels or scores.


def label_order(values, as_text=False):
    """Label values in id order when none are declared: numerically when all are integers (unless
    as_text), else as strings."""
    if not as_text and all(v.lstrip("-").isdigit() for v in values):
        return sorted(values, key=int)
    return sorted(values)


def read_splits(spec, paths, keys, columns, target, training=None, labels_as_text=False):
    """TaskData of a task whose files (one per split, in `keys` order) hold `columns`, the last one
    the target: "label" (class ids: the declared labels' order, else those of the `training` split,
    sorted: numerically when all are integers, unless labels_as_text, else as strings) or "score"
    (numbers). Text columns are kept as written, or whitespace-tokenized when the task says so."""
    from embeval.errors import DataFileError
    from embeval.tasks import tabular
    from embeval.tasks.files import join_tokens

    names = dict(spec.column_names)
    texts = columns[:-1]
    tokenized = spec.tokenization == "whitespace"
    loaded = {}
    for key in keys:
        path = paths[key]
        lines, found = tabular.read_columns(path, spec.format, columns, names, spec.name)
        last = columns[-1]
        read = tabular.number_column if target == "score" else tabular.label_column
        if spec.format == "jsonl" and not all(isinstance(t, str) for c in texts for t in found[c]):
            for i, line in enumerate(lines):  # the first problem in row order (texts, then the target)
                for c in texts:
                    tabular.text_field(found[c][i], names.get(c, c), path, spec.name, line)
                read([found[last][i]], names.get(last, last), path, spec.name, [line])
        columns_read = [[join_tokens(t) for t in found[c]] if tokenized else found[c] for c in texts]
        values = read(found[last], names.get(last, last), path, spec.name, lines)
        loaded[key] = (path, lines, columns_read, values)
    classes = None
    if target == "label":
        declared = getattr(spec.params, "labels", None)
        source = training or keys[0]
        classes = list(declared) if declared else label_order(set(loaded[source][3]), labels_as_text)
        ids = {c: i for i, c in enumerate(classes)}
        for key, (path, lines, _, values) in loaded.items():
            unknown = next((i for i, v in enumerate(values) if v not in ids), None)
            if unknown is not None:
                where = f"the declared labels ({', '.join(classes)})" if declared else f"the {source} split"
                raise DataFileError(
                    f"label {values[unknown]!r} of the {key} split is not in {where}",
                    file=path,
                    task=spec.name,
                    line=lines[unknown],
                )
        if len(classes) < 2:
            path = loaded[source][0]
            raise DataFileError(
                f"the label column has one class ({classes[0]!r}); a classification task needs two or more",
                file=path,
                task=spec.name,
            )
    splits = {}
    for key, (_path, _lines, texts_read, values) in loaded.items():
        y = np.array([ids[v] for v in values], dtype=np.int64) if target == "label" else np.array(values)
        splits[key] = Split(key, texts_read[0], y, b=texts_read[1] if len(texts) == 2 else None)
    return TaskData(
        spec.name, splits, classes, [v[0] for v in loaded.values()], spaced=spec.tokenization == "whitespace"
    )
