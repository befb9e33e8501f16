"""Parsers for SentEval's task files (SPEC §1), each returning a TaskData in file order.

Every loader reproduces what SentEval's own loader reads: the same encodings, line splitting,
columns, skipped headers and label ids. A sample's sentence is its tokens joined by single
spaces. Malformed input raises DataFileError naming the file and line.
"""

import os
import pickle
import pickletools
import re
from pathlib import Path

import numpy as np

from embeval.errors import DATA_HINT, DataFileError
from embeval.tasks.samples import Split, TaskData

_ASCII_WS = re.compile(rb"[ \t\n\r\x0b\x0c]+")


def join_tokens(text):
    """Tokens split on whitespace (str.split), joined by single spaces."""
    return " ".join(text.split())


def join_byte_tokens(text):
    """Tokens of the UTF-8 bytes split on ASCII whitespace (SentEval's SNLI and COCO loaders)."""
    return b" ".join(_ASCII_WS.split(text.encode("utf-8").strip(b" \t\n\r\x0b\x0c"))).decode("utf-8")


def data_path(root, relative, task):
    """The path of one task file under the data folder, which must exist."""
    root = Path(root)
    if not root.is_dir():
        raise DataFileError(f"data folder not found; {DATA_HINT}", file=root, task=task)
    path = root / relative
    if not path.is_file():
        raise DataFileError(f"missing data file; {DATA_HINT}", file=path, task=task)
    return path


def read_text(path, encoding, task):
    """A file's text with universal newlines, or a one-line error."""
    try:
        with open(path, encoding=encoding) as f:
            return f.read()
    except UnicodeDecodeError as err:
        raise DataFileError(
            f"not valid {encoding} text (byte {err.start})", file=path, task=task, line=_line_at(path, err.start)
        )
    except OSError as err:
        raise DataFileError(f"cannot read: {err.strerror}", file=path, task=task)


def _line_at(path, offset):
    """The line number holding byte `offset` of the file."""
    with open(path, "rb") as f:
        return f.read(offset).count(b"\n") + 1


def iter_lines(path, encoding, task):
    """(line number, line) over a file as Python iterates it (breaks on newlines only)."""
    text = read_text(path, encoding, task)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return enumerate(lines, start=1)


def _malformed(path, task, lineno, what):
    return DataFileError(what, file=path, task=task, line=lineno)


def load_binary(root, task):
    """MR, CR, SUBJ, MPQA: one sentence a line; the first file is label 1, the second label 0."""
    files = [data_path(root, rel, task.name) for rel in task.files]
    texts, labels = [], []
    for path, label in zip(files, (1, 0)):
        lines = read_text(path, task.encoding, task.name).splitlines()
        texts.extend(join_tokens(line) for line in lines)
        labels.extend([label] * len(lines))
    split = Split("all", texts, np.array(labels, dtype=np.int64))
    return TaskData(task.name, {"all": split}, task.classes, files)


def _split_names(task):
    return ("train", "dev", "test") if len(task.files) == 3 else ("train", "test")


def _parse_lines(root, task, parse_line, skip_header=False):
    """Apply parse_line(line) -> sample tuple to every line of each split file."""
    splits, files = {}, []
    for name, rel in zip(_split_names(task), task.files):
        path = data_path(root, rel, task.name)
        files.append(path)
        rows = []
        for lineno, line in iter_lines(path, task.encoding, task.name):
            if skip_header and lineno == 1:
                continue
            try:
                rows.append(parse_line(line))
            except (ValueError, IndexError, KeyError) as err:
                raise _malformed(path, task.name, lineno, f"malformed line ({err})")
        splits[name] = rows
    return splits, files


def _expect(condition, message):
    if not condition:
        raise ValueError(message)


def load_sst(root, task):
    """SST2 (`text<TAB>label`) and SST5 (`label text`)."""
    nclasses = len(task.classes)

    def parse(line):
        if task.params["format"] == "tab":
            fields = line.strip().split("\t")
            _expect(len(fields) >= 2, "expected TEXT<TAB>LABEL")
            text, label = fields[0], fields[1]
        else:
            fields = line.strip().split(" ", 1)
            _expect(len(fields) == 2, "expected LABEL TEXT")
            label, text = fields
        label = int(label)
        _expect(0 <= label < nclasses, f"label {label} outside 0..{nclasses - 1}")
        return join_tokens(text), label

    rows, files = _parse_lines(root, task, parse)
    return TaskData(task.name, _single_splits(rows), task.classes, files)


def load_trec(root, task):
    """TREC: `COARSE:fine words…`; the words after the first space, coarse label ids."""
    ids = {c: i for i, c in enumerate(task.classes)}

    def parse(line):
        target, sample = line.strip().split(":", 1)
        _expect(target in ids, f"unknown coarse label {target!r}")
        _expect(" " in sample, "expected COARSE:fine followed by the question")
        return join_tokens(sample.split(" ", 1)[1]), ids[target]

    rows, files = _parse_lines(root, task, parse)
    return TaskData(task.name, _single_splits(rows), task.classes, files)


def _single_splits(rows):
    return {
        name: Split(name, [t for t, _ in r], np.array([y for _, y in r], dtype=np.int64)) for name, r in rows.items()
    }


def _pair_splits(rows, dtype):
    return {
        name: Split(
            name,
            [a for a, _, _ in r],
            np.array([y for _, _, y in r], dtype=dtype),
            b=[b for _, b, _ in r],
        )
        for name, r in rows.items()
    }


def load_mrpc(root, task):
    """MRPC: header skipped; tab columns label, id1, id2, sentence1, sentence2."""

    def parse(line):
        fields = line.strip().split("\t")
        _expect(len(fields) >= 5, "expected 5 tab-separated columns")
        label = int(fields[0])
        _expect(label in (0, 1), f"label {label} is not 0 or 1")
        return join_tokens(fields[3]), join_tokens(fields[4]), label

    rows, files = _parse_lines(root, task, parse, skip_header=True)
    return TaskData(task.name, _pair_splits(rows, np.int64), task.classes, files)


def load_sick(root, task):
    """SICK: header skipped; columns pair_ID, A, B, relatedness, judgment."""
    ids = {"CONTRADICTION": 0, "NEUTRAL": 1, "ENTAILMENT": 2}
    relatedness = task.params["target"] == "relatedness"

    def parse(line):
        fields = line.strip().split("\t")
        _expect(len(fields) >= 5, "expected 5 tab-separated columns")
        score = float(fields[3])
        _expect(fields[4] in ids, f"unknown entailment judgment {fields[4]!r}")
        return join_tokens(fields[1]), join_tokens(fields[2]), score if relatedness else ids[fields[4]]

    rows, files = _parse_lines(root, task, parse, skip_header=True)
    dtype = np.float64 if relatedness else np.int64
    return TaskData(task.name, _pair_splits(rows, dtype), task.classes, files)


def load_stsb(root, task):
    """STS Benchmark: tab columns; column 4 is the score, columns 5 and 6 the sentences."""

    def parse(line):
        fields = line.strip().split("\t")
        _expect(len(fields) >= 7, "expected at least 7 tab-separated columns")
        return join_tokens(fields[5]), join_tokens(fields[6]), float(fields[4])

    rows, files = _parse_lines(root, task, parse)
    return TaskData(task.name, _pair_splits(rows, np.float64), None, files)


def load_stsb_raw(root, task):
    """STS Benchmark's test split as distributed (cased, untokenized): the sentences of columns 6
    and 7 kept as written (surrounding whitespace dropped), the score of column 5."""
    path = data_path(root, task.files[0], task.name)
    rows = []
    for lineno, line in iter_lines(path, task.encoding, task.name):
        fields = line.rstrip("\r").split("\t")
        if len(fields) < 7:
            raise _malformed(path, task.name, lineno, "malformed line (expected at least 7 tab-separated columns)")
        try:
            score = float(fields[4])
        except ValueError:
            raise _malformed(path, task.name, lineno, f"score {fields[4]!r} is not a number")
        rows.append((fields[5].strip(), fields[6].strip(), score))
    return TaskData(task.name, _pair_splits({"test": rows}, np.float64), None, [path])


def load_sts(root, task):
    """STS12–16: per subset, an input file of sentence pairs and a gold file (blank = unscored)."""
    splits, files = {}, []
    for subset in task.params["subsets"]:
        folder = task.params["folder"]
        inp = data_path(root, f"{folder}/STS.input.{subset}.txt", task.name)
        gold = data_path(root, f"{folder}/STS.gs.{subset}.txt", task.name)
        files += [inp, gold]
        pairs = read_text(inp, task.encoding, task.name).splitlines()
        scores = read_text(gold, task.encoding, task.name).splitlines()
        if len(pairs) != len(scores):
            raise DataFileError(
                f"{len(scores)} gold lines for {len(pairs)} sentence pairs in {inp.name}",
                file=gold,
                task=task.name,
            )
        a, b, y = [], [], []
        for lineno, (pair, score) in enumerate(zip(pairs, scores), start=1):
            fields = pair.split("\t")
            if len(fields) != 2:
                raise _malformed(inp, task.name, lineno, "expected two tab-separated sentences")
            if score.strip() == "":
                continue
            try:
                y.append(float(score))
            except ValueError:
                raise _malformed(gold, task.name, lineno, f"gold score {score!r} is not a number")
            a.append(join_tokens(fields[0]))
            b.append(join_tokens(fields[1]))
        splits[subset] = Split(subset, a, np.array(y, dtype=np.float64), b=b)
    return TaskData(task.name, splits, None, files)


def load_snli(root, task):
    """SNLI: s1/s2 (latin-1, byte tokens as in SentEval) and labels per split."""
    ids = {c: i for i, c in enumerate(task.classes)}
    splits, files = {}, []
    for name, suffix in (("train", "train"), ("dev", "dev"), ("test", "test")):
        paths = [data_path(root, f"{task.params['folder']}/{f}.{suffix}", task.name) for f in ("s1", "s2", "labels")]
        files += paths
        s1 = read_text(paths[0], task.encoding, task.name).splitlines()
        s2 = read_text(paths[1], task.encoding, task.name).splitlines()
        labels = read_text(paths[2], "utf-8", task.name).splitlines()
        if not len(s1) == len(s2) == len(labels):
            raise DataFileError(
                f"{len(s1)} premises, {len(s2)} hypotheses and {len(labels)} labels differ in count",
                file=paths[2],
                task=task.name,
            )
        for lineno, label in enumerate(labels, start=1):
            if label not in ids:
                raise _malformed(paths[2], task.name, lineno, f"unknown label {label!r}")
        splits[name] = Split(
            name,
            [join_byte_tokens(s) for s in s1],
            np.array([ids[label] for label in labels], dtype=np.int64),
            b=[join_byte_tokens(s) for s in s2],
            sort_label=labels,
        )
    return TaskData(task.name, splits, task.classes, files)


class _Refused(pickle.UnpicklingError):
    """The pickle asks to build something other than plain data."""


_NUMBER_KINDS = "biufc"  # bool, signed and unsigned integers, IEEE floats, complex
_MAX_ARRAY_BYTES = 1 << 34


def _damaged(what):
    return pickle.UnpicklingError(f"damaged numpy {what}")


class _DType:
    """Stands in for numpy.dtype(spec) while unpickling: numpy never sees an unchecked state
    (a damaged dtype or array state can crash numpy's C code)."""

    def __init__(self, spec, align=False, copy=False):
        if not isinstance(spec, str) or len(spec) > 8:
            raise _damaged("dtype")
        try:
            self.dtype = np.dtype(spec)
        except TypeError:
            raise _damaged("dtype")
        if self.dtype.kind not in _NUMBER_KINDS or self.dtype.fields is not None or self.dtype.subdtype:
            raise _Refused(f"refused to build arrays of dtype {spec!r}: only numbers are allowed")

    def __setstate__(self, state):
        # (version, byte order, subarray, names, fields, element size, alignment, flags[, metadata])
        if not (
            isinstance(state, tuple)
            and len(state) in (8, 9)
            and state[0] in (3, 4)
            and state[1] in ("<", ">", "|", "=")
            and state[2:5] == (None, None, None)
        ):
            raise _damaged("dtype")
        if state[1] in "<>":
            self.dtype = self.dtype.newbyteorder(state[1])


def _real_dtype(dtype):
    if isinstance(dtype, _DType):
        return dtype.dtype
    raise _damaged("array dtype")


def _array(raw, dtype, shape, order):
    """A fresh array from checked parts: raw bytes, a dtype, a shape of non-negative ints, C or F order."""
    dtype = _real_dtype(dtype)
    if isinstance(raw, str):
        raw = raw.encode("latin-1")
    if not isinstance(shape, tuple) or not all(type(n) is int and n >= 0 for n in shape) or order not in "CF":
        raise _damaged("array shape")
    size = dtype.itemsize * int(np.prod(shape, dtype=object))
    if not isinstance(raw, (bytes, bytearray, pickle.PickleBuffer)) or size > _MAX_ARRAY_BYTES:
        raise _damaged("array data")
    if memoryview(raw).nbytes != size:
        raise _damaged("array data")
    return np.frombuffer(raw, dtype=dtype).reshape(shape, order=order).copy(order="K")


class _Array:
    """Stands in for numpy's _reconstruct(ndarray, (0,), typecode) until its state arrives."""

    def __init__(self, cls, shape, typecode):
        if cls is not _NDARRAY:
            raise _damaged("array")
        self.array = None

    def __setstate__(self, state):
        # (version, shape, dtype, Fortran order, raw data)
        if not (isinstance(state, tuple) and len(state) == 5 and state[0] == 1 and isinstance(state[3], bool)):
            raise _damaged("array")
        self.array = _array(state[4], state[2], state[1], "F" if state[3] else "C")


_NDARRAY = object()


def _scalar(dtype, raw):
    return _array(raw, dtype, (), "C")[()]


def _frombuffer(buf, dtype, shape, order):
    return _array(buf, dtype, shape, order)


def _latin1(text, encoding):
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise _damaged("array bytes")
    return text.encode("latin-1")


def _empty_bytes(*args):
    """bytes() as protocol-2 pickles write an empty bytes object (an empty array's data)."""
    if args:
        raise _damaged("array bytes")
    return b""


def _plain(value, seen=None):
    """The unpickled structure with every stand-in replaced by the array it built."""
    seen = set() if seen is None else seen
    if isinstance(value, _Array):
        if value.array is None:
            raise _damaged("array")
        return value.array
    if isinstance(value, _DType):
        return value.dtype
    if isinstance(value, (dict, list)) and id(value) not in seen:
        seen.add(id(value))
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in list(items):
            value[key] = _plain(item, seen)
    elif isinstance(value, tuple):
        return tuple(_plain(item, seen) for item in value)
    return value


class _PlainDataUnpickler(pickle.Unpickler):
    """Builds only plain containers, strings, numbers and numpy arrays of numbers; refuses any other
    global. numpy's own constructors are replaced by stand-ins that check every part (dtype, shape,
    byte count) before an array is made, so damaged bytes cannot reach numpy's C code.

    numpy arrays carry their bytes through `_codecs.encode` (str -> bytes) in protocol <= 2
    pickles written by Python 3, and through `_frombuffer` in protocol 5 ones.
    """

    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"): _Array,
        ("numpy._core.multiarray", "_reconstruct"): _Array,
        ("numpy.core.multiarray", "scalar"): _scalar,
        ("numpy._core.multiarray", "scalar"): _scalar,
        ("numpy", "ndarray"): _NDARRAY,
        ("numpy", "dtype"): _DType,
        ("builtins", "set"): set,
        ("builtins", "frozenset"): frozenset,
        ("builtins", "complex"): complex,
        ("numpy.core.numeric", "_frombuffer"): _frombuffer,  # protocol-5 pickles of arrays
        ("numpy._core.numeric", "_frombuffer"): _frombuffer,
        ("_codecs", "encode"): _latin1,  # protocol-2 pickles written by Python 3 carry array bytes through it
        ("builtins", "bytes"): _empty_bytes,
    }

    def find_class(self, module, name):
        module = "builtins" if module == "__builtin__" else module  # Python 2's name
        if (module, name) in self._ALLOWED:
            return self._ALLOWED[module, name]
        raise _Refused(f"refused to build {module}.{name}: only plain data is allowed")


def load_plain_pickle(path, task):
    """Unpickle a data file with the restricted unpickler (Python 2 pickles as latin-1).

    Every opcode and the length of its argument are checked first (pickletools.genops): given a
    damaged length, CPython's unpickler can leak the buffer and print a SystemError on stderr."""
    try:
        with open(path, "rb") as f:
            for _ in pickletools.genops(f):
                pass
            f.seek(0)
            return _plain(_PlainDataUnpickler(f, encoding="latin1").load())
    except _Refused as err:
        raise DataFileError(f"not a plain-data pickle: {err}", file=path, task=task)
    except OSError as err:
        raise DataFileError(f"cannot read: {err.strerror or err}", file=path, task=task)
    except Exception as err:  # damaged bytes make the unpickler fail in any of a dozen ways
        raise DataFileError(f"corrupt pickle ({type(err).__name__}: {str(err)[:200]})", file=path, task=task)


def _image_features(features, path, task):
    """COCO's image features as a finite float32 (images, dim) array, or a one-line error."""
    try:
        images = np.asarray(features)
    except (ValueError, TypeError) as err:
        raise DataFileError(f"features are not an array ({err})", file=path, task=task.name)
    if images.dtype.kind not in "fiu":
        raise DataFileError(f"features must be real numbers, got {images.dtype}", file=path, task=task.name)
    if images.ndim != 2:
        raise DataFileError(
            f"features must be one vector per image, got shape {images.shape}", file=path, task=task.name
        )
    images = images.astype(np.float32)
    if not np.isfinite(images).all():
        raise DataFileError("features contain NaN or Inf", file=path, task=task.name)
    return images


def _coco_split(path, task, name):
    data = load_plain_pickle(path, task.name)
    try:
        features = data["features"]
        links = data["image_to_caption_ids"]
        captions = data["captions"]
    except (KeyError, TypeError, IndexError):
        raise DataFileError(
            "expected a dict with features, image_to_caption_ids and captions", file=path, task=task.name
        )
    images = _image_features(features, path, task)
    texts, image_of = [], []
    for image in range(len(images)):
        try:
            ids = list(links[image])
            if len(ids) < 5:
                raise DataFileError(
                    f"image {image} has {len(ids)} captions, at least 5 are needed", file=path, task=task.name
                )
            for cid in ids[:5]:
                texts.append(join_byte_tokens(captions[cid]["cleaned_caption"] + " ."))
                image_of.append(image)
        except (KeyError, TypeError, IndexError) as err:
            raise DataFileError(f"image {image}: caption lookup failed ({err!r})", file=path, task=task.name)
    return Split(name, texts, np.array(image_of, dtype=np.int64), images=images)


def load_coco(root, task):
    """ImageCaptionRetrieval: train/valid/test pickles; five captions per image."""
    splits, files = {}, []
    for name, rel in zip(("train", "dev", "test"), task.files):
        path = data_path(root, rel, task.name)
        files.append(path)
        splits[name] = _coco_split(path, task, name)
    return TaskData(task.name, splits, None, files)


def load_probing(root, task):
    """Probing: `SPLIT<TAB>LABEL<TAB>…<TAB>SENTENCE`; label ids follow the sorted train labels."""
    path = data_path(root, task.files[0], task.name)
    names = {"tr": "train", "va": "dev", "te": "test"}
    rows = {"train": [], "dev": [], "test": []}
    for lineno, line in iter_lines(path, task.encoding, task.name):
        fields = line.rstrip().split("\t")
        if len(fields) < 3 or fields[0] not in names:
            raise _malformed(
                path, task.name, lineno, "expected SPLIT<TAB>LABEL<TAB>…<TAB>SENTENCE with SPLIT tr, va or te"
            )
        rows[names[fields[0]]].append((join_tokens(fields[-1]), fields[1], lineno))
    classes = sorted({label for _, label, _ in rows["train"]})
    if not classes:
        raise DataFileError("no training samples (lines starting with tr)", file=path, task=task.name)
    ids = {c: i for i, c in enumerate(classes)}
    splits = {}
    for name, r in rows.items():
        for _, label, lineno in r:
            if label not in ids:
                raise _malformed(path, task.name, lineno, f"label {label!r} does not occur in the train split")
        splits[name] = Split(name, [t for t, _, _ in r], np.array([ids[lbl] for _, lbl, _ in r], dtype=np.int64))
    return TaskData(task.name, splits, classes, [path])


def default_data_dir():
    """The per-user data folder used when neither --data nor EMBEVAL_DATA is given."""
    if os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    elif os.uname().sysname == "Darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "embeval"


def resolve_data_dir(data=None):
    """--data, else EMBEVAL_DATA, else the per-user data folder."""
    if data:
        return Path(data)
    if os.environ.get("EMBEVAL_DATA"):
        return Path(os.environ["EMBEVAL_DATA"])
    return default_data_dir()
