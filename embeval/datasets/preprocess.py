"""The steps that turn downloaded archives into SentEval's files, run in a staging folder.

Each step of a data set in data/sources.json names an operation (`do`) implemented here:

copy              a member of a download (or the whole download) to a file
copy_tree         every file under a folder of an archive (SentEval moves whole STS folders)
rename            a file of the staging folder (STS 2016's file names)
delete_chars      remove characters from a file, bytewise (TREC's quotes; MRPC's carriage returns)
tokenize_columns  SentEval's `cut | tokenizer.perl | lowercase.perl` and `paste`: some tab-separated
                  columns are Moses-tokenized (and lowercased), the others kept; a header line may
                  be kept as it is
ptb               `[cat -v |] sed -f tokenizer.sed` over a whole file (MR, CR, SUBJ, MPQA)
replace_line      an erratum: one line of a produced file replaced by SentEval's form of it, when the
                  line is exactly the recorded `from` text (see the step's `why`)
snli              SNLI's split: pairs with a gold label, columns 1, 6, 7; labels, then s1 and s2
                  through the Penn Treebank rules
"""

import os
import re
from functools import cache
from pathlib import Path

from embeval.datasets import files, ptb
from embeval.datasets.archives import as_text_lines
from embeval.datasets.moses import MosesTokenizer, lowercase
from embeval.errors import EmbevalError


@cache
def _moses(profile):
    return MosesTokenizer(profile)


def run_steps(dataset, archives, staging):
    """Run the data set's steps; `archives` maps download file names to opened Archives, and
    `staging` is laid out like the data folder (files go to staging/dataset.folder/...)."""
    target = Path(staging) / dataset.folder
    files.make_dirs(target)
    for step in dataset.steps:
        STEPS[step["do"]](step, archives, target)


def _copy(step, archives, target):
    archive = archives[step["archive"]]
    out = target / step["to"]
    files.make_dirs(out.parent)
    if archive.kind == "plain" and "member" not in step:
        try:
            os.link(archive.path, out)
            return
        except OSError:
            pass
        with archive.open_plain() as source:
            files.copy_stream(source, out)
    else:
        files.write_bytes(out, archive.read(step.get("member")))


def _copy_tree(step, archives, target):
    for rel, data in archives[step["archive"]].tree(step["member"]).items():
        out = target / rel
        files.make_dirs(out.parent)
        files.write_bytes(out, data)


def _rename(step, archives, target):
    source = target / step["file"]
    if not source.is_file():
        raise EmbevalError(f"the download has no file {step['file']}", file=source)
    os.replace(source, target / step["to"])


def _delete_chars(step, archives, target):
    path = target / step["file"]
    files.write_bytes(path, path.read_bytes().translate(None, step["chars"].encode("latin-1")))


def cut(line, spec):
    """GNU cut -f SPEC on one line (bytes): SPEC lists fields N or ranges N-M; a line without a
    tab is printed whole."""
    if b"\t" not in line:
        return line
    wanted = set()
    for part in spec.split(","):
        low, _, high = part.partition("-")
        wanted.update(range(int(low), int(high or low) + 1))
    return b"\t".join(f for i, f in enumerate(line.split(b"\t"), 1) if i in wanted)


def _tokenized(values, profile, lower):
    tokenizer = _moses(profile)
    out = []
    for value in values:
        text = tokenizer.tokenize(value.decode("utf-8", errors="surrogateescape"))
        out.append((lowercase(text) if lower else text).encode("utf-8", errors="surrogateescape"))
    return out


def tokenize_columns(data, columns, profile, lower=False, header=False):
    """SentEval's cut/tokenize/paste over a whole file (bytes -> bytes)."""
    lines, _ = as_text_lines(data)
    head = b""
    if header and lines:
        head = lines[0] + (b"\n" if len(lines) > 1 or data.endswith(b"\n") else b"")
        lines = lines[1:]
    built = []
    for column in columns:
        values = [cut(line, column["cut"]) for line in lines]
        if column.get("tokenize"):
            values = _tokenized(values, profile, lower)
        built.append(values)
    return head + b"".join(b"\t".join(row) + b"\n" for row in zip(*built))


def _tokenize_columns(step, archives, target):
    path = target / step["file"]
    if not path.is_file():
        raise EmbevalError(f"the download has no file {step['file']}", file=path)
    files.write_bytes(
        path,
        tokenize_columns(
            path.read_bytes(), step["columns"], step["moses"], step.get("lowercase", False), step.get("header", False)
        ),
    )


def ptb_file(data, show_nonprinting=False):
    """`[cat -v |] sed -f tokenizer.sed` over a whole file (bytes -> bytes)."""
    if show_nonprinting:
        data = ptb.show_nonprinting(data)
    lines, newline = as_text_lines(data)
    text = [ptb.tokenize(line.decode("utf-8", errors="surrogateescape")) for line in lines]
    out = "\n".join(text) + ("\n" if newline else "")
    return out.encode("utf-8", errors="surrogateescape")


def _ptb(step, archives, target):
    data = archives[step["archive"]].read(step.get("member"))
    files.write_bytes(target / step["to"], ptb_file(data, step.get("show_nonprinting", False)))


def snli_split(data):
    """SNLI's files for one split: {"labels": bytes, "s1": bytes, "s2": bytes}."""
    lines, _ = as_text_lines(data)
    kept = [line for line in lines if re.split(rb"[ \t]+", line.lstrip(b" \t"))[0] != b"-"]
    rows = [cut(line, "1,6,7") for line in kept][1:]
    labels = b"".join(cut(row, "1") + b"\n" for row in rows)
    first = b"\n".join(cut(row, "2") for row in rows) + (b"\n" if rows else b"")
    second = b"\n".join(cut(row, "3") for row in rows) + (b"\n" if rows else b"")
    return {"labels": labels, "s1": ptb_file(first), "s2": ptb_file(second)}


def _snli(step, archives, target):
    parts = snli_split(archives[step["archive"]].read(step["member"]))
    for kind, data in parts.items():
        files.write_bytes(target / f"{kind}.{step['split']}", data)


def _replace_line(step, archives, target):
    path = target / step["file"]
    lines, newline = as_text_lines(path.read_bytes())
    index = step["line"] - 1
    if 0 <= index < len(lines) and lines[index] == step["from"].encode("utf-8"):
        lines[index] = step["to"].encode("utf-8")
        files.write_bytes(path, b"\n".join(lines) + (b"\n" if newline else b""))


STEPS = {
    "copy": _copy,
    "copy_tree": _copy_tree,
    "rename": _rename,
    "delete_chars": _delete_chars,
    "tokenize_columns": _tokenize_columns,
    "ptb": _ptb,
    "replace_line": _replace_line,
    "snli": _snli,
}
