"""The generic files of a user's task: TSV, CSV or JSONL with named columns.

- TSV: one row a line (a CRLF line end is a line end), fields separated by tabs, no quoting: a field
  is exactly the text between two tabs (as in SentEval's and BEIR's files). The first line is the
  header.
- CSV: RFC 4180 (fields may be quoted, and quoted fields may hold commas, quotes and line breaks);
  the first row is the header.
- JSONL: one JSON object a line, with the columns as keys (other keys are ignored).

Files are UTF-8 (a byte-order mark at the start is dropped). A task's [columns] table maps the
column names embeval uses (text, label, sentence1, ...) to the file's own. Every problem is one
line naming the file and the line: a header without a needed column, a row with another number of
fields than the header, bytes that are not UTF-8, a line that is not a JSON object.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from embeval.errors import DataFileError
from embeval.tasks.files import MAX_MAGNITUDE, finite_number
from embeval.untrusted import check_data_file, loads_json, warn_duplicates

Row = tuple[int, dict[str, Any]]  # (line number, {column: value})


def _text(path: Path, task: str) -> str:
    check_data_file(path, task, DataFileError)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataFileError("missing data file", file=path, task=task)
    except IsADirectoryError:
        raise DataFileError("is a folder, expected a data file", file=path, task=task)
    except OSError as err:
        raise DataFileError(f"cannot read: {err.strerror}", file=path, task=task)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise DataFileError(f"not valid UTF-8 text (byte {err.start})", file=path, task=task, line=line)
    return text[1:] if text.startswith("\ufeff") else text


def _header_columns(header: Sequence[str], wanted: Mapping[str, str], path: Path, task: str) -> dict[str, int]:
    """{column: position} of the wanted columns (their names in the file: wanted's values)."""
    positions = {}
    for column, name in wanted.items():
        if name not in header:
            renamed = f" (the file's name for {column})" if name != column else ""
            shown = ", ".join(repr(h) for h in header[:12])
            raise DataFileError(
                f"the header has no column {name!r}{renamed}; it has {shown} (a [columns] table in the task file "
                "maps embeval's column names to the file's)",
                file=path,
                task=task,
                line=1,
            )
        if header.count(name) > 1:
            raise DataFileError(f"the header names column {name!r} twice", file=path, task=task, line=1)
        positions[column] = header.index(name)
    return positions


def _delimited(text: str, fmt: str, wanted: Mapping[str, str], path: Path, task: str) -> list[Row]:
    if fmt == "tsv":
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        records = [(i, (line[:-1] if line.endswith("\r") else line).split("\t")) for i, line in enumerate(lines, 1)]
    else:
        reader = csv.reader(io.StringIO(text, newline=""), strict=True)
        records = []
        try:
            for fields in reader:
                records.append((reader.line_num, fields))
        except csv.Error as err:
            raise DataFileError(f"not valid CSV ({err})", file=path, task=task, line=reader.line_num)
    if not records:
        raise DataFileError("empty file (no header)", file=path, task=task)
    header = records[0][1]
    positions = _header_columns(header, wanted, path, task)
    rows = []
    for lineno, fields in records[1:]:
        if len(fields) != len(header):
            raise DataFileError(
                f"{len(fields)} fields, the header has {len(header)}"
                + (" (a tab inside a text? TSV has no quoting: use CSV or JSONL)" if fmt == "tsv" else ""),
                file=path,
                task=task,
                line=lineno,
            )
        rows.append((lineno, {column: fields[i] for column, i in positions.items()}))
    return rows


def _jsonl(text: str, wanted: Mapping[str, str], path: Path, task: str) -> list[Row]:
    rows = []
    duplicates: list[tuple[int | None, str]] = []
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            item = loads_json(line, DataFileError, file=path, task=task, line=lineno, duplicates=duplicates)
        except json.JSONDecodeError as err:
            raise DataFileError(f"not a JSON object ({err.msg})", file=path, task=task, line=lineno)
        if not isinstance(item, dict):
            raise DataFileError("not a JSON object", file=path, task=task, line=lineno)
        missing = [name for name in wanted.values() if name not in item]
        if missing:
            raise DataFileError(f"no key {missing[0]!r}", file=path, task=task, line=lineno)
        rows.append((lineno, {column: item[name] for column, name in wanted.items()}))
    warn_duplicates(duplicates, path, task)
    return rows


def read_rows(path: Path, fmt: str, columns: Sequence[str], names: Mapping[str, str], task: str) -> list[Row]:
    """The rows of a data file: (line number, {column: value}) for the given columns (their names in
    the file from `names`, else the column's own). An empty file is an error."""
    wanted = {column: names.get(column, column) for column in columns}
    text = _text(path, task)
    rows = _jsonl(text, wanted, path, task) if fmt == "jsonl" else _delimited(text, fmt, wanted, path, task)
    if not rows:
        raise DataFileError("no rows (an empty split)", file=path, task=task)
    return rows


def read_columns(
    path: Path, fmt: str, columns: Sequence[str], names: Mapping[str, str], task: str
) -> tuple[Sequence[int], dict[str, list[Any]]]:
    """read_rows by column: (each row's line number, {column: its values in row order}); the same
    values and errors. A TSV file whose rows all have the header's number of fields is split at once
    (one list, not a list and a dict per row: thousands of small containers cost the garbage
    collector more than the splitting)."""
    wanted = {column: names.get(column, column) for column in columns}
    text = _text(path, task)
    found = _tsv_columns(text, wanted, path, task) if fmt == "tsv" else None
    if found is not None:
        return found
    rows = _jsonl(text, wanted, path, task) if fmt == "jsonl" else _delimited(text, fmt, wanted, path, task)
    if not rows:
        raise DataFileError("no rows (an empty split)", file=path, task=task)
    return [line for line, _ in rows], {column: [row[column] for _, row in rows] for column in columns}


def _tsv_columns(
    text: str, wanted: Mapping[str, str], path: Path, task: str
) -> tuple[range, dict[str, list[str]]] | None:
    """_delimited's TSV columns when every row has the header's number of fields; None otherwise
    (_delimited then says what is wrong, and where)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        return None
    if "\r" in text:
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    header = lines[0].split("\t")
    positions = _header_columns(header, wanted, path, task)
    tabs = len(header) - 1
    body = lines[1:]
    if any(line.count("\t") != tabs for line in body):
        return None
    fields = "\t".join(body).split("\t") if tabs else body
    width = tabs + 1
    return range(2, len(body) + 2), {column: fields[i::width] for column, i in positions.items()}


def number_column(values: Sequence[Any], column: str, path: Path, task: str, lines: Sequence[int]) -> list[float]:
    """number_field of each value (its row's line in `lines`), the texts of a TSV or CSV file parsed at once."""
    if all(type(value) is str for value in values):
        import numpy as np

        try:
            numbers = np.fromiter(map(float, values), dtype=np.float64, count=len(values))
        except (ValueError, OverflowError):
            numbers = None
        if numbers is not None and bool(np.all(np.abs(numbers) <= MAX_MAGNITUDE)):  # NaN fails too
            return numbers.tolist()
    return [number_field(value, column, path, task, line) for value, line in zip(values, lines)]


def label_column(values: Sequence[Any], column: str, path: Path, task: str, lines: Sequence[int]) -> list[str]:
    """label_field of each value (its row's line in `lines`)."""
    if all(type(value) is str for value in values) and "" not in values:
        return list(values)
    return [label_field(value, column, path, task, line) for value, line in zip(values, lines)]


def text_field(value: Any, column: str, path: Path, task: str, line: int) -> str:
    """A text column's value: a string."""
    if not isinstance(value, str):
        raise DataFileError(f"{column} must be a string, got {value!r}", file=path, task=task, line=line)
    return value


def number_field(value: Any, column: str, path: Path, task: str, line: int) -> float:
    """A number column's value: a finite number of bounded magnitude (text is parsed; files.finite_number)."""
    try:
        return finite_number(value)
    except ValueError as err:
        raise DataFileError(f"{column} {err}", file=path, task=task, line=line)


def label_field(value: Any, column: str, path: Path, task: str, line: int) -> str:
    """A label's value as text (JSON integers and strings alike)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise DataFileError(f"{column} must be a string or an integer, got {value!r}", file=path, task=task, line=line)
    text = str(value)
    if text == "":
        raise DataFileError(f"{column} is empty", file=path, task=task, line=line)
    return text
