"""SentEval's file formats (the built-in tasks' `format = "senteval-..."`), each read into a TaskData
in file order.

Every loader reproduces what SentEval's own loader reads: the same encodings, line splitting,
columns, skipped headers and label ids (a task's `labels`, in id order, name its classes). A
sample's sentence is its tokens joined by single spaces. Malformed input raises DataFileError
naming the file and line. A loader takes the task and its files by [files] key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from embeval.errors import DataFileError
from embeval.tasks.files import finite_number, iter_lines, join_byte_tokens, join_tokens, read_text, require
from embeval.tasks.pickles import load_plain_pickle
from embeval.tasks.samples import Split, TaskData

if TYPE_CHECKING:
    from embeval.tasks.spec import TaskSpec

Paths = Mapping[str, Path]


def _labels(spec: TaskSpec) -> tuple[str, ...]:
    return tuple(getattr(spec.params, "labels", None) or ())


def _files(spec: TaskSpec, paths: Paths, keys: tuple[str, ...]) -> list[Path]:
    return [require(paths[key], spec.name) for key in keys]


def _malformed(path: Path, task: str, lineno: int, what: str) -> DataFileError:
    return DataFileError(what, file=path, task=task, line=lineno)


def load_binary(spec: TaskSpec, paths: Paths) -> TaskData:
    """MR, CR, SUBJ, MPQA: one sentence a line (latin-1); file label1 is class 1, label0 class 0."""
    files = _files(spec, paths, ("label1", "label0"))
    texts: list[str] = []
    labels: list[int] = []
    for path, label in zip(files, (1, 0)):
        lines = read_text(path, "latin-1", spec.name).splitlines()
        texts.extend(join_tokens(line) for line in lines)
        labels.extend([label] * len(lines))
    split = Split("all", texts, np.array(labels, dtype=np.int64))
    return TaskData(spec.name, {"all": split}, list(_labels(spec)), files)


def _parse_lines(
    spec: TaskSpec,
    paths: Paths,
    splits: tuple[str, ...],
    encoding: str,
    parse_line: Callable[[str], Any],
    skip_header: bool = False,
) -> tuple[dict[str, list], list[Path]]:
    """Apply parse_line(line) -> sample tuple to every line of each split file."""
    rows, files = {}, []
    for name, path in zip(splits, _files(spec, paths, splits)):
        files.append(path)
        found = []
        for lineno, line in iter_lines(path, encoding, spec.name):
            if skip_header and lineno == 1:
                continue
            try:
                found.append(parse_line(line))
            except (ValueError, IndexError, KeyError) as err:
                raise _malformed(path, spec.name, lineno, f"malformed line ({err})")
        rows[name] = found
    return rows, files


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def load_sst(spec: TaskSpec, paths: Paths) -> TaskData:
    """SST2 (`text<TAB>label`) and SST5 (`label text`)."""
    nclasses = len(_labels(spec))
    tab = spec.format == "senteval-sst2"

    def parse(line: str) -> tuple[str, int]:
        if tab:
            fields = line.strip().split("\t")
            _expect(len(fields) >= 2, "expected TEXT<TAB>LABEL")
            text, label = fields[0], fields[1]
        else:
            fields = line.strip().split(" ", 1)
            _expect(len(fields) == 2, "expected LABEL TEXT")
            label, text = fields
        value = int(label)
        _expect(0 <= value < nclasses, f"label {value} outside 0..{nclasses - 1}")
        return join_tokens(text), value

    rows, files = _parse_lines(spec, paths, ("train", "dev", "test"), "utf-8", parse)
    return TaskData(spec.name, _single_splits(rows), list(_labels(spec)), files)


def load_trec(spec: TaskSpec, paths: Paths) -> TaskData:
    """TREC: `COARSE:fine words…` (latin-1); the words after the first space, coarse label ids."""
    ids = {c: i for i, c in enumerate(_labels(spec))}

    def parse(line: str) -> tuple[str, int]:
        target, sample = line.strip().split(":", 1)
        _expect(target in ids, f"unknown coarse label {target!r}")
        _expect(" " in sample, "expected COARSE:fine followed by the question")
        return join_tokens(sample.split(" ", 1)[1]), ids[target]

    rows, files = _parse_lines(spec, paths, ("train", "test"), "latin-1", parse)
    return TaskData(spec.name, _single_splits(rows), list(_labels(spec)), files)


def _single_splits(rows: Mapping[str, list]) -> dict[str, Split]:
    return {
        name: Split(name, [t for t, _ in r], np.array([y for _, y in r], dtype=np.int64)) for name, r in rows.items()
    }


def _pair_splits(rows: Mapping[str, list], dtype: Any) -> dict[str, Split]:
    return {
        name: Split(name, [a for a, _, _ in r], np.array([y for _, _, y in r], dtype=dtype), b=[b for _, b, _ in r])
        for name, r in rows.items()
    }


def load_mrpc(spec: TaskSpec, paths: Paths) -> TaskData:
    """MRPC: header skipped; tab columns label, id1, id2, sentence1, sentence2."""

    def parse(line: str) -> tuple[str, str, int]:
        fields = line.strip().split("\t")
        _expect(len(fields) >= 5, "expected 5 tab-separated columns")
        label = int(fields[0])
        _expect(label in (0, 1), f"label {label} is not 0 or 1")
        return join_tokens(fields[3]), join_tokens(fields[4]), label

    rows, files = _parse_lines(spec, paths, ("train", "test"), "utf-8", parse, skip_header=True)
    return TaskData(spec.name, _pair_splits(rows, np.int64), list(_labels(spec)), files)


def load_sick(spec: TaskSpec, paths: Paths) -> TaskData:
    """SICK: header skipped; columns pair_ID, A, B, relatedness, judgment. A task with labels reads the
    judgment (their ids: the labels' order), one without the relatedness score."""
    labels = _labels(spec)
    ids = {c: i for i, c in enumerate(labels)}
    judgments = ("CONTRADICTION", "NEUTRAL", "ENTAILMENT")

    def parse(line: str) -> tuple[str, str, float | int]:
        fields = line.strip().split("\t")
        _expect(len(fields) >= 5, "expected 5 tab-separated columns")
        score = finite_number(fields[3])
        _expect(fields[4] in judgments, f"unknown entailment judgment {fields[4]!r}")
        return join_tokens(fields[1]), join_tokens(fields[2]), ids[fields[4]] if labels else score

    rows, files = _parse_lines(spec, paths, ("train", "dev", "test"), "utf-8", parse, skip_header=True)
    return TaskData(spec.name, _pair_splits(rows, np.int64 if labels else np.float64), list(labels) or None, files)


def load_stsb(spec: TaskSpec, paths: Paths) -> TaskData:
    """STS Benchmark: tab columns; column 4 is the score, columns 5 and 6 the sentences."""

    def parse(line: str) -> tuple[str, str, float]:
        fields = line.strip().split("\t")
        _expect(len(fields) >= 7, "expected at least 7 tab-separated columns")
        return join_tokens(fields[5]), join_tokens(fields[6]), finite_number(fields[4])

    rows, files = _parse_lines(spec, paths, ("train", "dev", "test"), "utf-8", parse)
    return TaskData(spec.name, _pair_splits(rows, np.float64), None, files)


def load_stsb_raw(spec: TaskSpec, paths: Paths) -> TaskData:
    """STS Benchmark's test split as distributed (cased, untokenized): the sentences of columns 6
    and 7 kept as written (surrounding whitespace dropped), the score of column 5."""
    (path,) = _files(spec, paths, ("test",))
    rows = []
    for lineno, line in iter_lines(path, "utf-8", spec.name):
        fields = line.rstrip("\r").split("\t")
        if len(fields) < 7:
            raise _malformed(path, spec.name, lineno, "malformed line (expected at least 7 tab-separated columns)")
        try:
            score = finite_number(fields[4])
        except ValueError as err:
            raise _malformed(path, spec.name, lineno, f"score {err}")
        rows.append((fields[5].strip(), fields[6].strip(), score))
    return TaskData(spec.name, _pair_splits({"test": rows}, np.float64), None, [path])


def load_sts(spec: TaskSpec, paths: Paths) -> TaskData:
    """STS12–16: per subset (files SUBSET.input and SUBSET.gs), an input file of sentence pairs and a
    gold file (a blank gold line: the pair is not scored)."""
    subsets = list(dict.fromkeys(key.rsplit(".", 1)[0] for key, _ in spec.files))
    splits, files = {}, []
    for subset in subsets:
        inp, gold = _files(spec, paths, (f"{subset}.input", f"{subset}.gs"))
        files += [inp, gold]
        pairs = read_text(inp, "utf-8", spec.name).splitlines()
        scores = read_text(gold, "utf-8", spec.name).splitlines()
        if len(pairs) != len(scores):
            raise DataFileError(
                f"{len(scores)} gold lines for {len(pairs)} sentence pairs in {inp.name}", file=gold, task=spec.name
            )
        a, b, y = [], [], []
        for lineno, (pair, score) in enumerate(zip(pairs, scores), start=1):
            fields = pair.split("\t")
            if len(fields) != 2:
                raise _malformed(inp, spec.name, lineno, "expected two tab-separated sentences")
            if score.strip() == "":
                continue
            try:
                y.append(finite_number(score))
            except ValueError as err:
                raise _malformed(gold, spec.name, lineno, f"gold score {err}")
            a.append(join_tokens(fields[0]))
            b.append(join_tokens(fields[1]))
        splits[subset] = Split(subset, a, np.array(y, dtype=np.float64), b=b)
    return TaskData(spec.name, splits, None, files)


def load_snli(spec: TaskSpec, paths: Paths) -> TaskData:
    """SNLI: s1/s2 (latin-1, byte tokens as in SentEval) and labels per split."""
    ids = {c: i for i, c in enumerate(_labels(spec))}
    splits, files = {}, []
    for name in ("train", "dev", "test"):
        s1_path, s2_path, labels_path = _files(spec, paths, (f"s1.{name}", f"s2.{name}", f"labels.{name}"))
        files += [s1_path, s2_path, labels_path]
        s1 = read_text(s1_path, "latin-1", spec.name).splitlines()
        s2 = read_text(s2_path, "latin-1", spec.name).splitlines()
        labels = read_text(labels_path, "utf-8", spec.name).splitlines()
        if not len(s1) == len(s2) == len(labels):
            raise DataFileError(
                f"{len(s1)} premises, {len(s2)} hypotheses and {len(labels)} labels differ in count",
                file=labels_path,
                task=spec.name,
            )
        for lineno, label in enumerate(labels, start=1):
            if label not in ids:
                raise _malformed(labels_path, spec.name, lineno, f"unknown label {label!r}")
        splits[name] = Split(
            name,
            [join_byte_tokens(s) for s in s1],
            np.array([ids[label] for label in labels], dtype=np.int64),
            b=[join_byte_tokens(s) for s in s2],
            sort_label=labels,
        )
    return TaskData(spec.name, splits, list(_labels(spec)), files)


def _image_features(features: Any, path: Path, task: str) -> np.ndarray:
    """COCO's image features as a finite float32 (images, dim) array, or a one-line error."""
    try:
        images = np.asarray(features)
    except (ValueError, TypeError) as err:
        raise DataFileError(f"features are not an array ({err})", file=path, task=task)
    if images.dtype.kind not in "fiu":
        raise DataFileError(f"features must be real numbers, got {images.dtype}", file=path, task=task)
    if images.ndim != 2:
        raise DataFileError(f"features must be one vector per image, got shape {images.shape}", file=path, task=task)
    images = images.astype(np.float32)
    if not np.isfinite(images).all():
        raise DataFileError("features contain NaN or Inf", file=path, task=task)
    return images


def _coco_split(path: Path, task: str, name: str) -> Split:
    data = load_plain_pickle(path, task)
    try:
        features = data["features"]
        links = data["image_to_caption_ids"]
        captions = data["captions"]
    except (KeyError, TypeError, IndexError):
        raise DataFileError("expected a dict with features, image_to_caption_ids and captions", file=path, task=task)
    images = _image_features(features, path, task)
    texts, image_of = [], []
    for image in range(len(images)):
        try:
            ids = list(links[image])
            if len(ids) < 5:
                raise DataFileError(
                    f"image {image} has {len(ids)} captions, at least 5 are needed", file=path, task=task
                )
            for cid in ids[:5]:
                texts.append(join_byte_tokens(captions[cid]["cleaned_caption"] + " ."))
                image_of.append(image)
        except (KeyError, TypeError, IndexError) as err:
            raise DataFileError(f"image {image}: caption lookup failed ({err!r})", file=path, task=task)
    return Split(name, texts, np.array(image_of, dtype=np.int64), images=images)


def load_coco(spec: TaskSpec, paths: Paths) -> TaskData:
    """ImageCaptionRetrieval: train/valid/test pickles (read with the restricted unpickler); five
    captions per image."""
    splits, files = {}, []
    for name, path in zip(("train", "dev", "test"), _files(spec, paths, ("train", "dev", "test"))):
        files.append(path)
        splits[name] = _coco_split(path, spec.name, name)
    return TaskData(spec.name, splits, None, files)


def load_probing(spec: TaskSpec, paths: Paths) -> TaskData:
    """Probing: `SPLIT<TAB>LABEL<TAB>…<TAB>SENTENCE`; label ids follow the sorted train labels."""
    (path,) = _files(spec, paths, ("all",))
    names = {"tr": "train", "va": "dev", "te": "test"}
    rows: dict[str, list[tuple[str, str, int]]] = {"train": [], "dev": [], "test": []}
    for lineno, line in iter_lines(path, "utf-8", spec.name):
        fields = line.rstrip().split("\t")
        if len(fields) < 3 or fields[0] not in names:
            raise _malformed(
                path, spec.name, lineno, "expected SPLIT<TAB>LABEL<TAB>…<TAB>SENTENCE with SPLIT tr, va or te"
            )
        rows[names[fields[0]]].append((join_tokens(fields[-1]), fields[1], lineno))
    classes = sorted({label for _, label, _ in rows["train"]})
    if not classes:
        raise DataFileError("no training samples (lines starting with tr)", file=path, task=spec.name)
    ids = {c: i for i, c in enumerate(classes)}
    splits = {}
    for name, r in rows.items():
        for _, label, lineno in r:
            if label not in ids:
                raise _malformed(path, spec.name, lineno, f"label {label!r} does not occur in the train split")
        splits[name] = Split(name, [t for t, _, _ in r], np.array([ids[lbl] for _, lbl, _ in r], dtype=np.int64))
    return TaskData(spec.name, splits, classes, [path])
