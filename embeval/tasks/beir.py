"""Readers of BEIR's file layout, which MTEB's retrieval and reranking tasks use, for a user's task.

Retrieval task: three files.
- corpus.jsonl: one JSON object per line, `_id` (string, or an integer read as its decimal string),
  `text` (string) and optionally `title` (string or null); other fields are ignored.
- queries.jsonl: one JSON object per line, `_id` and `text`.
- qrels/SPLIT.tsv: the header `query-id<TAB>corpus-id<TAB>score`, then one judgment a line; the
  score is an integer grade (>= 1 relevant, the gain of nDCG; 0 and negative grades non-relevant).
Reranking task: the same three files plus a candidates file (MTEB calls it "top_ranked"):
- the header `query-id<TAB>corpus-id`, then one line per candidate document of a query, in any order
  (the order is irrelevant: candidates are ranked by the model's scores). Its query ids are those of
  queries.jsonl, its corpus ids those of corpus.jsonl. MTEB 2.26 stores the same information as a
  list of corpus ids per query (the `top_ranked` subset, columns `query-id`, `corpus-ids`) and
  evaluates a reranking task as retrieval restricted to each query's candidates
  (mteb/models/search_wrappers.py, rerank_top_ranked_documents), scored with the retrieval figures
  (embeval.evaluate.ir_metrics). MTEB v1's reranking JSONL (query, positive list, negative list) is not
  read here: mteb 2.26 converts it (AbsTaskReranking.transform_old_dataset_format) by dropping queries
  without a positive or without a negative and naming documents "apositive_<query>_<i>" (grade 1) and
  "negative_<query>_<i>" (grade 0), so at an equal score a negative ranks first (ids descending).

What mteb 2.26.24 does, reproduced here:
- A document is encoded as `(title + " " + text).strip()` when its title is non-empty, else as
  `text.strip()` (mteb/_create_dataloaders.py, _corpus_to_dict); a query as its text, unchanged.
- Queries without any line in the qrels are left out (not encoded, not scored): mteb's loader keeps
  only the queries the qrels name (mteb/abstasks/retrieval_dataset_loaders.py, RetrievalDatasetLoader.load).
- Queries whose judgments all have grade <= 0 are kept and score 0 on every figure, lowering the means:
  mteb's _filter_queries_without_positives (mteb/abstasks/retrieval.py) drops only queries with no
  judgment at all. Reranking queries without candidates are kept too and score 0 (mteb warns
  "No pre-ranked documents found" and returns no result for them). Both cases are listed in `notes`.
- Stricter than mteb, as errors: qrels or candidates naming a query or document that does not exist
  (mteb counts an unknown relevant document in the denominators, and ignores an unknown query),
  duplicate ids or judgments, grades that are not integers, and empty corpus or query sets. With
  `missing_documents="count"` (the task's key `missing_documents = "count"`), judgments naming a
  document that is not in the corpus are taken as mteb takes them: the document can never be
  retrieved, and a grade >= 1 counts in the query's relevant documents (Recall's and MAP's
  denominators, the ideal DCG), as pytrec_eval counts it; a note says how many.

Every error is a DataFileError of one line naming the file, the line and what is wrong.
"""

import itertools
import json
import logging
import operator
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from embeval.errors import DataFileError
from embeval.untrusted import MAX_DEPTH, check_data_file, collector_paused, loads_json, warn_duplicates

logger = logging.getLogger("embeval")

QRELS_HEADER = ("query-id", "corpus-id", "score")
CANDIDATES_HEADER = ("query-id", "corpus-id")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_INT32 = (-(2**31), 2**31 - 1)
SHOWN = 3  # ids quoted in a message about many
PAIR_CHUNK_BYTES = 16 << 20  # a qrels or candidates file is read at once in pieces of about this size
MISSING_DOCUMENTS = ("refuse", "count")  # what a judgment naming a document outside the corpus is


@dataclass(frozen=True)
class RetrievalData:
    """A retrieval (or reranking) task's split as mteb evaluates it, in file order.

    doc_texts are the texts mteb encodes (title joined); queries are only those the qrels judge.
    qrels: (query rows, document rows, grades); candidates: (query rows, document rows) or None;
    absent: (query rows, grades) of the judgments naming documents that are not in the corpus (taken
    with missing_documents="count": relevant documents never retrieved)."""

    doc_ids: list[str]
    doc_texts: list[str]
    query_ids: list[str]
    query_texts: list[str]
    qrels: tuple[np.ndarray, np.ndarray, np.ndarray]
    candidates: tuple[np.ndarray, np.ndarray] | None = None
    notes: tuple[str, ...] = field(default=())
    absent: tuple[np.ndarray, np.ndarray] = field(default=(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)))


class _GrowingIndex(dict):
    """A document index that gives each id not in it a row of its own after the corpus's rows (read
    by _read_pairs through .get): judgments naming documents that are not in the corpus."""

    def get(self, key, default=None):
        row = dict.get(self, key)
        if row is None:
            row = self[key] = len(self)
        return row


def document_text(title: str | None, text: str) -> str:
    """The text mteb encodes for a document: title and text joined by a space, stripped."""
    return (title + " " + text).strip() if title else text.strip()


def _lines(path, task):
    """(line number, text) of each non-blank line of a UTF-8 file, newline characters removed."""
    check_data_file(path, task, DataFileError)
    try:
        f = open(path, "rb")
    except OSError as err:
        raise DataFileError(f"cannot read: {err.strerror}", file=path, task=task)
    with f:
        for number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise DataFileError(
                    f"not valid UTF-8 text (byte {err.start} of the line)", file=path, line=number, task=task
                )
            if number == 1:
                line = line.removeprefix("\ufeff")
            line = line.rstrip("\r\n")
            if line.strip():
                yield number, line


def _string(value, what, path, number, task):
    """A JSON string field checked to be text trec_eval and encoders can take."""
    if not isinstance(value, str):
        raise DataFileError(f"field {what} is {type(value).__name__}, not a string", file=path, line=number, task=task)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise DataFileError(f"field {what} holds a lone surrogate escape (not text)", file=path, line=number, task=task)
    return value


def _identifier(value, what, path, number, task):
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    value = _string(value, what, path, number, task)
    if "\0" in value:
        raise DataFileError(f"field {what} holds a NUL character", file=path, line=number, task=task)
    return value


def _kept_lines(path, task):
    """(numbers of the non-blank lines, all lines) of a UTF-8 file as _lines keeps them (split at
    newlines only, a first-line BOM removed; a line's CR is the caller's to strip), for the readers
    that take a whole file at once; None when it is not UTF-8."""
    check_data_file(path, task, DataFileError)
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    lines = text.removeprefix("\ufeff").split("\n")
    end = len(lines)
    while end and not lines[end - 1].strip():  # the newline that ends the file, trailing blank lines
        end -= 1
    if all(map(str.strip, lines[:end])):  # no blank line within
        return list(range(1, end + 1)), lines
    return [n for n, line in enumerate(lines, start=1) if line.strip()], lines


def _records_by_line(path, task, duplicates):
    """(line number, parsed JSON) of each non-blank line, a syntax error named with its line."""
    for number, line in _lines(path, task):
        try:
            yield number, loads_json(line, DataFileError, file=path, task=task, line=number, duplicates=duplicates)
        except json.JSONDecodeError as err:
            raise DataFileError(f"malformed JSON: {err.msg} (column {err.colno})", file=path, line=number, task=task)


def _records_at_once(path, task):
    """(line numbers, parsed JSON values) of _records_by_line from one parse of the whole file (the
    lines as one JSON array), or None when a line may be at fault (then the line-by-line reader
    finds it): not UTF-8, a syntax error, a line that is not one value, a duplicate key, a line
    with MAX_DEPTH brackets or more (possibly nested too deep)."""
    kept = _kept_lines(path, task)
    if kept is None:
        return None
    numbers, lines = kept
    joined = ",\n".join([lines[n - 1] for n in numbers])  # a line a line: JSON allows the newline
    if _most_opened_per_line(joined) >= MAX_DEPTH:
        return None
    duplicate = []

    def pairs(items):
        found = dict(items)
        if len(found) != len(items):
            duplicate.append(True)
        return found

    try:
        values = json.loads("[" + joined + "]", object_pairs_hook=pairs)
    except (json.JSONDecodeError, RecursionError):
        return None
    if duplicate or not isinstance(values, list) or len(values) != len(numbers):
        return None
    return numbers, values


def _most_opened_per_line(text):
    """The most brackets ([ and {) on one line of text (0: fewer than MAX_DEPTH in all), a bound of
    a line's JSON nesting; counted on the UTF-8 bytes (an ASCII byte is never part of a longer
    character), with no Python loop over the lines."""
    if text.count("[") + text.count("{") < MAX_DEPTH:
        return 0
    raw = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    opens = np.flatnonzero((raw == ord("[")) | (raw == ord("{")))
    return int(np.bincount(np.searchsorted(np.flatnonzero(raw == ord("\n")), opens)).max())


def read_jsonl(path: str | Path, task: str, *, with_title: bool, quiet: bool = False) -> tuple[list[str], list[str]]:
    """(ids, texts) of a BEIR corpus.jsonl (with_title: texts as mteb joins them) or queries.jsonl;
    quiet: no warning of weak ids and empty query texts (a file embeval wrote, whose source says them)."""
    ids: list[str] = []
    texts: list[str] = []
    first_line: dict[str, int] = {}
    duplicates: list[tuple[int | None, str]] = []
    blank_ids: list[int] = []
    tab_ids: list[int] = []
    empty_texts: list[int] = []
    with collector_paused():  # hundreds of thousands of new dicts and strings, none in a cycle
        records = _records_at_once(path, task)
        fast = None if records is None else _fields_at_once(records, with_title)
    if fast is not None:
        ids, texts, blank_ids, tab_ids, empty_texts = fast
        records = [], []
    for number, record in _records_by_line(path, task, duplicates) if records is None else zip(*records):
        if not isinstance(record, dict):
            raise DataFileError(
                f"a line must be a JSON object, not {type(record).__name__}", file=path, line=number, task=task
            )
        for name in ("_id", "text"):
            if name not in record:
                raise DataFileError(f"missing field '{name}'", file=path, line=number, task=task)
        doc_id = _identifier(record["_id"], "'_id'", path, number, task)
        if doc_id in first_line:
            raise DataFileError(
                f"duplicate _id '{doc_id}' (first on line {first_line[doc_id]})", file=path, line=number, task=task
            )
        first_line[doc_id] = number
        if not doc_id.strip():
            blank_ids.append(number)
        elif "\t" in doc_id:
            tab_ids.append(number)
        text = _string(record["text"], "'text'", path, number, task)
        if not with_title and not text.strip():
            empty_texts.append(number)
        if with_title:
            title = record.get("title")
            title = None if title is None else _string(title, "'title'", path, number, task)
            text = document_text(title, text)
        ids.append(doc_id)
        texts.append(text)
    if not ids:
        raise DataFileError("no documents" if with_title else "no queries", file=path, task=task)
    warn_duplicates(duplicates, path, task)
    for lines, what in (
        ()
        if quiet
        else (
            (blank_ids, "an empty or whitespace-only _id"),
            (tab_ids, "an _id holding a tab (a qrels row, tab-separated, can never name it)"),
            (empty_texts, "an empty query text (its vector is an encoder's embedding of nothing)"),
        )
    ):
        if lines:
            logger.warning(
                f"{path}: {task}: {len(lines)} line{'s' if len(lines) > 1 else ''} with {what}, first line {lines[0]}"
            )
    return ids, texts


def _fields_at_once(records, with_title):
    """read_jsonl's (ids, texts, blank-id lines, tab-id lines, empty-text lines) from whole-list
    checks (C-level loops: map, join, set), or None when any record may be at fault or need
    converting (an integer _id): then the record-by-record loop reads them and names the first line
    at fault."""
    numbers, values = records
    if set(map(type, values)) != {dict}:
        return None
    try:
        ids = list(map(operator.itemgetter("_id"), values))
        texts = list(map(operator.itemgetter("text"), values))
    except KeyError:
        return None
    titles = list(map(dict.get, values, itertools.repeat("title"))) if with_title else []
    if set(map(type, ids)) != {str} or set(map(type, texts)) != {str}:
        return None
    if not set(map(type, titles)) <= {str, type(None)}:
        return None
    all_ids = "".join(ids)
    try:  # a lone surrogate escape in any of them
        all_ids.encode("utf-8"), "".join(texts).encode("utf-8"), "".join(filter(None, titles)).encode("utf-8")
    except UnicodeEncodeError:
        return None
    if "\0" in all_ids or len(set(ids)) != len(ids):
        return None
    blank = tabs = empty = []
    if not all(map(str.strip, ids)):
        blank = [n for n, doc_id in zip(numbers, ids) if not doc_id.strip()]
    if "\t" in all_ids:
        tabs = [n for n, doc_id in zip(numbers, ids) if "\t" in doc_id and doc_id.strip()]
    if not with_title and not all(map(str.strip, texts)):
        empty = [n for n, text in zip(numbers, texts) if not text.strip()]
    if with_title:
        texts = list(map(document_text, titles, texts)) if any(titles) else list(map(str.strip, texts))
    return ids, texts, blank, tabs, empty


def _tabs_on_every_line(lines, tabs):
    """Whether every line holds exactly `tabs` tab characters (counted at once, in their UTF-8 bytes)."""
    raw = np.frombuffer("\n".join(lines).encode("utf-8"), dtype=np.uint8)
    ends = np.append(np.flatnonzero(raw == 10), len(raw))
    before = np.searchsorted(np.flatnonzero(raw == 9), ends)  # tabs before each line's end
    return bool((np.diff(before, prepend=0) == tabs).all())


def _read_pairs(path, task, header, query_index, doc_index, what):
    """(query rows, document rows, third column, line numbers) of a qrels or candidates TSV. A file
    with nothing wrong is read at once (_pairs_at_once); any other goes line by line, which names
    the first line at fault."""
    found = _pairs_at_once(path, task, header, query_index, doc_index)
    return found if found is not None else _read_pairs_by_line(path, task, header, query_index, doc_index, what)


def _pairs_at_once(path, task, header, query_index, doc_index, chunk_bytes=PAIR_CHUNK_BYTES):
    """_read_pairs' result for a file with nothing wrong, from whole-chunk operations (chunks of about
    chunk_bytes, cut after a newline: the memory stays that of the arrays, whatever the file's
    size); None when any line may be at fault (then the line-by-line reader finds it): the same
    lines kept (split at newlines, CR LF and a first-line BOM removed, blank lines skipped), the same
    checks."""
    check_data_file(path, task, DataFileError)
    width = len(header)
    parts: list[tuple[np.ndarray, ...]] = []
    seen_header = False
    try:
        source = open(path, "rb")
    except OSError:
        return None
    with source:
        first, rest = 1, b""  # the number of the chunk's first line; the bytes after its last newline
        while True:
            block = source.read(chunk_bytes)
            data, rest = rest + block, b""
            if block:
                cut = data.rfind(b"\n") + 1
                if not cut:  # no whole line yet
                    rest = data
                    continue
                data, rest = data[:cut], data[cut:]
            elif not data:
                break
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                return None
            if first == 1:
                text = text.removeprefix("\ufeff")
            lines = text.split("\n")
            if block:
                lines.pop()  # after the chunk's last newline: the next chunk's
            del text, data
            count = len(lines)
            if all(map(str.strip, lines)):  # no blank line
                numbers = np.arange(first, first + count, dtype=np.int64)
            else:
                numbers = np.array([first + i for i, line in enumerate(lines) if line.strip()], dtype=np.int64)
                lines = [line for line in lines if line.strip()]
            first += count
            kept = [line.rstrip("\r") for line in lines]
            del lines
            if not seen_header and kept:
                if tuple(kept[0].split("\t")) != header:
                    return None
                seen_header = True
                kept, numbers = kept[1:], numbers[1:]
            if not kept:
                continue
            if not _tabs_on_every_line(kept, width - 1):
                return None
            fields = "\t".join(kept).split("\t")  # one flat list: no list per line for the collector to scan
            del kept
            # int32 until the end (rows of the indexes; line numbers below 2**31 checked there): half the memory
            try:  # .get: None for an id the queries or the corpus do not hold (a _GrowingIndex gives it a row)
                query = np.fromiter(map(query_index.get, fields[0::width]), np.int32, len(fields) // width)
                doc = np.fromiter(map(doc_index.get, fields[1::width]), np.int32, len(fields) // width)
            except TypeError:  # None: an id not held
                return None
            grade = None
            if width == 3:
                grades = [f.strip() for f in fields[2::width]]
                if not all(g.isascii() and _INTEGER.fullmatch(g) and len(g) < 12 for g in grades):
                    return None
                grade = np.array([int(g) for g in grades], dtype=np.int64)
                if ((grade < _INT32[0]) | (grade > _INT32[1])).any():
                    return None
            if first >= 2**31:
                return None
            parts.append((query, doc, grade, numbers.astype(np.int32)))
    if not parts:
        return None
    query, doc, numbers = (np.concatenate([part[i] for part in parts], dtype=np.int64) for i in (0, 1, 3))
    grade = np.zeros(len(query), dtype=np.int64) if width == 2 else np.concatenate([part[2] for part in parts])
    del parts
    pair = query * (int(doc.max()) + 1)
    pair += doc
    pair.sort()
    if (pair[1:] == pair[:-1]).any():  # a pair listed twice
        return None
    return query, doc, grade, numbers


def _read_pairs_by_line(path, task, header, query_index, doc_index, what):
    rows = []
    lines = _lines(path, task)
    number, line = next(lines, (1, ""))
    if tuple(line.split("\t")) != header:
        expected = "<TAB>".join(header)
        raise DataFileError(f"the first line must be the header {expected}", file=path, line=number, task=task)
    seen = {}
    unknown = {"query": [], "corpus": []}
    for number, line in lines:
        fields = line.split("\t")
        if len(fields) != len(header):
            raise DataFileError(
                f"expected {len(header)} tab-separated columns, found {len(fields)}", file=path, line=number, task=task
            )
        query_id, doc_id = fields[0], fields[1]
        if (query_id, doc_id) in seen:
            raise DataFileError(
                f"{what} ({query_id}, {doc_id}) is listed twice (first on line {seen[query_id, doc_id]})",
                file=path,
                line=number,
                task=task,
            )
        seen[query_id, doc_id] = number
        grade = 0
        if len(header) == 3:
            if not _INTEGER.fullmatch(fields[2].strip()):
                raise DataFileError(f"grade '{fields[2]}' is not an integer", file=path, line=number, task=task)
            grade = int(fields[2])
            if not _INT32[0] <= grade <= _INT32[1]:
                raise DataFileError(f"grade {grade} is outside the 32-bit integers", file=path, line=number, task=task)
        query_row, doc_row = query_index.get(query_id, -1), doc_index.get(doc_id, -1)
        if query_row < 0:
            unknown["query"].append((number, query_id))
        if doc_row < 0:
            unknown["corpus"].append((number, doc_id))
        rows.append((query_row, doc_row, grade, number))
    for kind, source in (("query", "the queries file"), ("corpus", "the corpus")):
        missing = unknown[kind]
        if missing:
            shown = ", ".join(f"'{name}'" for _, name in missing[:SHOWN])
            raise DataFileError(
                f"{len(missing)} {what} line(s) name a {kind} id that is not in {source} (first: {shown})",
                file=path,
                line=missing[0][0],
                task=task,
            )
    if not rows:
        raise DataFileError(f"no {what} lines after the header", file=path, task=task)
    query, doc, grade, numbers = (np.array(column, dtype=np.int64) for column in zip(*rows))
    return query, doc, grade, numbers


def _first(ids, rows):
    return ", ".join(f"'{ids[r]}'" for r in rows[:SHOWN])


def load_retrieval(
    corpus: str | Path,
    queries: str | Path,
    qrels: str | Path,
    task: str,
    candidates: str | Path | None = None,
    missing_documents: str = "refuse",
    quiet: bool = False,
) -> RetrievalData:
    """A retrieval task's split from BEIR's files (a reranking task's when `candidates` is given),
    with the queries mteb evaluates (those the qrels name) and notes of what mteb does silently.
    missing_documents: "refuse" (an error) or "count" judgments naming documents not in the corpus;
    quiet: read_jsonl's warnings left out (files embeval wrote from a source that says them)."""
    if missing_documents not in MISSING_DOCUMENTS:
        raise ValueError(f"missing_documents must be one of {MISSING_DOCUMENTS}, not {missing_documents!r}")
    doc_ids, doc_texts = read_jsonl(corpus, task, with_title=True, quiet=quiet)
    all_query_ids, all_query_texts = read_jsonl(queries, task, with_title=False, quiet=quiet)
    query_index = dict(zip(all_query_ids, range(len(all_query_ids))))
    doc_index = dict(zip(doc_ids, range(len(doc_ids))))
    judged_index = _GrowingIndex(doc_index) if missing_documents == "count" else doc_index
    judged_query, judged_doc, grade, _ = _read_pairs(qrels, task, QRELS_HEADER, query_index, judged_index, "judgment")
    notes = []
    outside = judged_doc >= len(doc_ids)
    absent_query, absent_grade = judged_query[outside], grade[outside]
    if outside.any():
        absent_ids = list(judged_index)[len(doc_ids) :]
        relevant_absent = int((absent_grade >= 1).sum())
        notes.append(
            f"{qrels}: {int(outside.sum())} judgments name {len(absent_ids)} documents that are not in the corpus "
            f"(first: {', '.join(repr(d) for d in absent_ids[:SHOWN])}); {relevant_absent} of grade >= 1 count as "
            "relevant documents never retrieved, as MTEB (pytrec_eval) counts them"
        )
        judged_query, judged_doc, grade = judged_query[~outside], judged_doc[~outside], grade[~outside]
    judged = np.zeros(len(all_query_ids), dtype=bool)
    judged[judged_query] = True
    judged[absent_query] = True
    kept = np.flatnonzero(judged)
    if len(kept) < len(all_query_ids):
        dropped = np.flatnonzero(~judged)
        notes.append(
            f"{queries}: {len(dropped)} of {len(all_query_ids)} queries have no line in {qrels} "
            f"(first: {_first(all_query_ids, dropped)}); they are left out, as MTEB leaves them out"
        )
    new_row = np.cumsum(judged) - 1
    query_ids = [all_query_ids[r] for r in kept]
    query_texts = [all_query_texts[r] for r in kept]
    qrels_arrays = (new_row[judged_query], judged_doc, grade)
    absent_arrays = (new_row[absent_query], absent_grade)
    relevant = np.zeros(len(query_ids), dtype=bool)
    relevant[qrels_arrays[0][grade >= 1]] = True
    relevant[absent_arrays[0][absent_grade >= 1]] = True
    if not relevant.all():
        none = np.flatnonzero(~relevant)
        notes.append(
            f"{qrels}: {len(none)} of {len(query_ids)} queries have no document of grade >= 1 "
            f"(first: {_first(query_ids, none)}); MTEB keeps them and they score 0 on every figure"
        )
    candidate_arrays = None
    if candidates is not None:
        cand_query, cand_doc, _, _ = _read_pairs(
            candidates, task, CANDIDATES_HEADER, query_index, doc_index, "candidate"
        )
        evaluated = judged[cand_query]
        if not evaluated.all():
            notes.append(
                f"{candidates}: {int((~evaluated).sum())} candidate lines belong to queries without a line "
                f"in {qrels}; they are ignored, as MTEB ignores them"
            )
        candidate_arrays = (new_row[cand_query[evaluated]], cand_doc[evaluated])
        has_candidates = np.zeros(len(query_ids), dtype=bool)
        has_candidates[candidate_arrays[0]] = True
        if not has_candidates.all():
            none = np.flatnonzero(~has_candidates)
            notes.append(
                f"{candidates}: {len(none)} of {len(query_ids)} queries have no candidate "
                f"(first: {_first(query_ids, none)}); MTEB keeps them and they score 0 on every figure"
            )
    return RetrievalData(
        doc_ids, doc_texts, query_ids, query_texts, qrels_arrays, candidate_arrays, tuple(notes), absent_arrays
    )
