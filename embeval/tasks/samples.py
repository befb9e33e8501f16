"""Loaded task data: splits of samples (sentence texts, labels or scores) in file order."""

from dataclasses import dataclass, field

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
    """Every split of one task, plus label names where labels are categorical."""

    name: str
    splits: dict[str, Split]
    classes: list[str] | None = None
    files: list[str] = field(default_factory=list)

    def sentences(self):
        """All sentence slots of the task, split by split (the export order before dedup)."""
        out = []
        for split in self.splits.values():
            out.extend(split.sentences())
        return out


def token_count(text):
    """Tokens of an exported sentence (its tokens are joined by single spaces)."""
    return 0 if not text else text.count(" ") + 1


def senteval_order(split, rule):
    """The permutation SentEval applies to a split before building folds (a stable sort).

    rule 'single': (tokens, label); 'pair': (tokens of A, tokens of B, label or score);
    'snli': (tokens of B, tokens of A, raw label string); None: file order.
    """
    n = len(split)
    if rule is None:
        return np.arange(n)
    label = split.sort_label if split.sort_label is not None else split.y.tolist()
    ta = [token_count(s) for s in split.a]
    if rule == "single":
        keys = list(zip(ta, label))
    else:
        tb = [token_count(s) for s in split.b]
        keys = list(zip(ta, tb, label)) if rule == "pair" else list(zip(tb, ta, label))
    return np.array(sorted(range(n), key=keys.__getitem__), dtype=np.int64)


def split_rows(split, row_of):
    """Row indices (into the task's sentence table) of each sample's first and second sentence."""
    ia = np.fromiter((row_of[s] for s in split.a), dtype=np.int64, count=len(split.a))
    ib = None if split.b is None else np.fromiter((row_of[s] for s in split.b), dtype=np.int64, count=len(split.b))
    return ia, ib
