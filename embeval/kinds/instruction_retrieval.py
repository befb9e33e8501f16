"""Instruction retrieval as MTEB evaluates FollowIR (mteb 2.26.24; embeval.evaluate.followir): each
query comes with its original instruction (query id "Q-og") and a changed one ("Q-changed"); both are
retrieved by exact search of the corpus, scored against their judgments, and p-MRR measures how the
documents whose relevance the changed instruction alters moved between the two runs.

Files: BEIR's three (`corpus`, `queries` holding every "Q-og" and "Q-changed" query, `qrels`; see
embeval.kinds.retrieval), and, in the layout of mteb's dataset subsets:
- `instructions` (mteb's "instruction" subset): JSON lines `{"query-id": "Q-og", "instruction": "..."}`,
  one per query;
- `changed` (mteb's "qrel_diff" subset): JSON lines `{"query-id": "Q", "corpus-ids": ["d1", ...]}`, the
  documents whose relevance changes with the instruction, per query Q.
A query is embedded as mteb embeds it, its text, a space and its instruction; these texts are exported
as a list of their own (role "instructed_query": TASK.instructed_query), so an encoder can embed
instructed queries its own way. Keys: `similarity`, `depth` (as retrieval's).
Figures: p-MRR (the headline, MTEB's main score for FollowIR), the retrieval figures of every query,
and of the original (`og.`) and changed (`changed.`) runs. The interval resamples the changed queries.

That is protocol "followir" (the default). The other protocols are mteb's InstructionRetrieval tasks
(IFIR's and InstructIR's: embeval.evaluate.instructed), queries each with an instruction retrieved as
retrieval's queries are, files `corpus`, `queries`, `qrels` and `instructions`, figures retrieval's and:
- "levels" (IFIR): `level_scores.level_1` to `level_3`, the mean nDCG@20 of the queries whose id holds
  "v1", "v2" or "v3"; the intervals resample the queries;
- "robustness" (InstructIR): `robustness_at_10` (the headline), over the groups of queries sharing the
  id's part before "_", the mean of each group's lowest nDCG@10; the intervals resample the groups;
- "instructed": retrieval's figures only (IFIRCds, IFIRFire, IFIRNFCorpus).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from embeval.kinds.mteb_shared import lazy_statistic
from embeval.kinds.retrieval import FAMILIES, FIGURES, ROUNDED, Retrieval, RetrievalParams
from embeval.kinds.retrieval import read_params as read_retrieval_params
from embeval.stats import Statistic
from embeval.tasks.beir import RetrievalData
from embeval.tasks.declaration import Declaration
from embeval.tasks.figures import Column, Figure, lookup
from embeval.tasks.groups import Group
from embeval.tasks.kind import Line, ci_text, pct
from embeval.tasks.spec import TaskSpec

INSTRUCTED = "instructed_query"
SET_KIND = "followir"
P_MRR = Figure("p-MRR", "p-MRR", False)
FOLLOWIR, LEVELS, ROBUSTNESS, PLAIN = "followir", "levels", "robustness", "instructed"  # the protocols
INSTRUCTED_GROUP = "instructed-retrieval"  # the report table of the protocols other than FollowIR's
LEVELS_SET, GROUPS_SET = "instruction-levels", "query-groups"  # embeval.evaluate.instructed's prediction sets
LEVEL_FIGURES = tuple(Figure(f"level_scores.level_{j}", f"nDCG@20 of level-{j} instructions", False) for j in (1, 2, 3))
ROBUSTNESS_FIGURE = Figure("robustness_at_10", "robustness@10 (each query's lowest nDCG@10, mean)", False)
RUNS = (("og", "original instructions"), ("changed", "changed instructions"))
ORIGINAL, CHANGED = "-og", "-changed"


@dataclass(frozen=True)
class InstructionData(RetrievalData):
    """A FollowIR split: retrieval's data (query_texts: each query joined with its instruction), and
    the pairs p-MRR compares: (row of Q-og, row of Q-changed, rows of Q's changed documents), sorted by Q."""

    pairs: tuple[tuple[int, int, tuple[int, ...]], ...] = field(default=())


def _statistic(factory: str, argument: Any) -> Statistic:
    """A statistic of embeval.evaluate.instructed, the module imported on first use."""

    def function(W: Any, arrays: Any) -> Any:
        from embeval.evaluate import instructed

        return getattr(instructed, factory)(argument)(W, arrays)

    return Statistic(function, False)


@dataclass(frozen=True)
class InstructedData(RetrievalData):
    """Retrieval's data of queries joined with their instructions (query_texts), and each evaluated
    query's level of instruction (IFIR) and group (InstructIR), by embeval.evaluate.instructed."""

    levels: Any = None
    groups: Any = None


class InstructionRetrieval(Retrieval):
    query_role = INSTRUCTED
    name = "instruction-retrieval"
    summary = "queries with instructions: FollowIR's p-MRR, IFIR's levels, InstructIR's robustness; MTEB's figures"
    protocols: ClassVar[tuple[str, ...]] = (FOLLOWIR, LEVELS, ROBUSTNESS, PLAIN)
    statistics = {
        SET_KIND: {P_MRR.path: lazy_statistic("embeval.evaluate.followir", P_MRR.path, False)},
        LEVELS_SET: {f"level_{j}": _statistic("level_mean", j) for j in (1, 2, 3)},
        GROUPS_SET: {name: _statistic("group_mean", name) for name in (ROBUSTNESS_FIGURE.path, *FIGURES)},
    }
    groups = {
        INSTRUCTED_GROUP: Group(
            INSTRUCTED_GROUP,
            "Instruction retrieval (MTEB: IFIR, InstructIR), x100",
            "Retrieval of queries carrying instructions as MTEB scores IFIR's and InstructIR's tasks (mteb 2.26.24, "
            "figures equal to its): each query joined with its instruction, the corpus searched exactly, each "
            "task's headline figure (nDCG@20 for IFIR, robustness@10 for InstructIR: each query's lowest nDCG@10 "
            "over its instructions, mean over the queries) x100",
        ),
        "followir": Group(
            "followir",
            "Instruction following (MTEB, FollowIR), p-MRR x100",
            "Instruction retrieval and reranking as MTEB scores FollowIR (mteb 2.26.24's evaluate_p_mrr_change, "
            "figures equal to its): how the documents whose relevance a changed instruction alters move between "
            "the runs of the original and the changed instructions, p-MRR x100 (-100 to 100, 0: no change)",
        ),
    }
    reranking = False

    def file_keys(self, protocol: str | None) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
        if protocol not in (None, FOLLOWIR):
            return ("corpus", "queries", "qrels", "instructions"), (), False
        extra = ("candidates",) if self.reranking else ()
        return ("corpus", "queries", "qrels", *extra, "instructions", "changed"), (), False

    def read_params(self, decl: Declaration, protocol: str | None) -> RetrievalParams:
        if self.reranking:
            return RetrievalParams(similarity=decl.take("similarity", default="cosine", choices=("cosine", "dot")))
        return read_retrieval_params(decl)

    def load(self, spec: TaskSpec, paths: Mapping[str, Path]) -> Any:
        import logging

        followir = spec.protocol in (None, FOLLOWIR)
        data = load_instructed(spec, paths) if followir else load_queries_with_instructions(spec, paths)
        for note in data.notes:
            logging.getLogger("embeval").warning(f"{spec.name}: {note}")
        return data

    def sizes(self, spec: TaskSpec, data: Any) -> str:
        sizes = super().sizes(spec, data)
        if spec.protocol == LEVELS:
            return (
                sizes
                + ", queries of levels 1 | 2 | 3: "
                + " | ".join(str(int((data.levels == j).sum())) for j in (1, 2, 3))
            )
        if spec.protocol == ROBUSTNESS:
            return f"{sizes}, {int(data.groups.max()) + 1} query groups"
        return sizes if spec.protocol == PLAIN else f"{sizes}, {len(data.pairs)} queries with changed judgments"

    def evaluate(self, ctx: Any) -> Any:
        params = ctx.task.params
        if ctx.task.protocol not in (None, FOLLOWIR):
            from embeval.evaluate import instructed

            main = ctx.task.headline.path
            retrieval_main = main if main in FIGURES else "ndcg_at_10"
            return instructed.evaluate(
                ctx,
                INSTRUCTED,
                retrieval_main,
                params.depth,
                params.similarity,
                params.ignore_identical_ids,
                ctx.task.protocol,
            )
        from embeval.evaluate import followir

        return followir.evaluate(ctx, INSTRUCTED, params.depth, params.similarity, self.reranking)

    def figures(self, spec: TaskSpec) -> tuple[Figure, ...]:
        if spec.protocol == LEVELS:
            return (*Retrieval.figures(self, spec), *LEVEL_FIGURES)
        if spec.protocol == ROBUSTNESS:
            return (ROBUSTNESS_FIGURE, *Retrieval.figures(self, spec))
        if spec.protocol == PLAIN:
            return Retrieval.figures(self, spec)
        runs = tuple(
            Figure(f"{run}.{f.path}", f"{f.label} ({words})", False) for run, words in RUNS for f in FIGURES.values()
        )
        return (P_MRR, *FIGURES.values(), *runs)

    def lines(self, spec: TaskSpec, results: Mapping[str, Any], ci: Mapping[str, Any] | None) -> list[Line]:
        if spec.protocol not in (None, FOLLOWIR):
            out = Retrieval.lines(self, spec, results, ci)
            if spec.protocol == LEVELS:
                levels = " | ".join(pct(lookup(results, f.path)) for f in LEVEL_FIGURES)
                out.insert(1, Line("nDCG@20 of instruction levels 1 | 2 | 3 x100 (IFIR)", levels))
            elif spec.protocol == ROBUSTNESS and spec.headline.path != ROBUSTNESS_FIGURE.path:
                out.insert(1, Line("robustness@10 x100 (InstructIR)", pct(results.get(ROBUSTNESS_FIGURE.path))))
            return out
        main = spec.headline
        out = [Line(f"{main.label} x100 (MTEB, FollowIR)", pct(lookup(results, main.path)) + ci_text(ci, main.path))]
        for family, words in FAMILIES[:2] + FAMILIES[4:5]:
            values = " | ".join(pct(lookup(results, f"{run}{family}_at_10")) for run in ("", "og.", "changed."))
            out.append(Line(f"{words}@10 all | original | changed x100", values))
        out.append(
            Line(
                "queries | changed queries | documents",
                f"{results.get('nqueries')} | {results.get('changed_queries')} | {results.get('ndocs')}",
            )
        )
        return out

    def columns(self, spec: TaskSpec) -> tuple[Column, ...]:
        if not spec.report.show:
            return ()
        main = spec.headline
        if spec.protocol not in (None, FOLLOWIR):
            return (
                Column(
                    spec.report.group or INSTRUCTED_GROUP,
                    main.path,
                    f"{main.label} x100",
                    scale=100.0,
                    header=spec.report.header,
                    order=spec.report.order,
                    note=f"{main.label}, exact search of instructed queries",
                ),
            )
        return (
            Column(
                spec.report.group or "followir",
                main.path,
                f"{main.label} x100",
                scale=100.0,
                header=spec.report.header,
                order=spec.report.order,
                note=f"{main.label}, {'candidates reranked' if self.reranking else 'exact search'}",
            ),
        )

    def mteb_scores(self, spec: TaskSpec, results: Mapping[str, Any]) -> dict[str, Any] | None:
        if spec.protocol not in (None, FOLLOWIR):
            return instructed_scores(spec, results)

        def rounded(figures: Mapping[str, Any]) -> dict[str, Any] | None:
            out = {}
            for name in FIGURES:
                value = figures.get(name)
                if not isinstance(value, (int, float)):
                    return None
                out[name] = round(value, 5) if name.split("_at_")[0] in ROUNDED else value
            out["accuracy"] = out["recall_at_1"]
            return out

        scores = rounded(results)
        runs = {run: rounded(results.get(run) or {}) for run, _ in RUNS}
        main = lookup(results, spec.headline.path)
        if scores is None or any(v is None for v in runs.values()) or not isinstance(main, (int, float)):
            return None
        return {**scores, "p-MRR": results["p-MRR"], **runs, "main_score": main}


def instructed_scores(spec: TaskSpec, results: Mapping[str, Any]) -> dict[str, Any] | None:
    """MTEB's score fields of IFIR's and InstructIR's protocols: retrieval's, and the task's own."""
    own: dict[str, Any] = {}
    if spec.protocol == LEVELS:
        levels = results.get("level_scores")
        if not isinstance(levels, Mapping):
            return None
        own["level_scores"] = {f"level_{j}": levels.get(f"level_{j}") for j in (1, 2, 3)}
    elif spec.protocol == ROBUSTNESS:
        own[ROBUSTNESS_FIGURE.path] = results.get(ROBUSTNESS_FIGURE.path)
    scores = Retrieval.mteb_scores(KIND, replace(spec, protocol=PLAIN, figure=None), results)  # retrieval's fields
    main = lookup(results, spec.headline.path)
    if scores is None or not isinstance(main, (int, float)) or isinstance(main, bool):
        return None
    return {**scores, **own, "main_score": main}


def load_queries_with_instructions(spec: TaskSpec, paths: Mapping[str, Path]) -> InstructedData:
    """BEIR's files and an instruction for every query, the queries joined with their instructions as
    mteb joins them; IFIR's levels (each needs a query) and InstructIR's groups."""
    from embeval.errors import DataFileError
    from embeval.evaluate import instructed
    from embeval.tasks.beir import load_retrieval, read_jsonl

    task = spec.name
    base = load_retrieval(
        paths["corpus"], paths["queries"], paths["qrels"], task, missing_documents=spec.params.missing_documents
    )
    known = set(read_jsonl(paths["queries"], task, with_title=False)[0])
    instructions: dict[str, str] = {}
    for number, record in _jsonl(paths["instructions"], task, ("query-id", "instruction")):
        query, text = record["query-id"], record["instruction"]
        problem = (
            f"query-id '{query}' is not in the queries file"
            if query not in known
            else f"a second instruction of query '{query}'"
            if query in instructions
            else "field 'instruction' must be a string"
            if not isinstance(text, str)
            else None
        )
        if problem:
            raise DataFileError(problem, file=paths["instructions"], line=number, task=task)
        instructions[query] = text
    missing = [q for q in base.query_ids if q not in instructions]
    if missing:
        raise DataFileError(
            f"{len(missing)} queries have no instruction (first: '{missing[0]}')",
            file=paths["instructions"],
            task=task,
        )
    texts = [_instructed(text, instructions[q]) for q, text in zip(base.query_ids, base.query_texts, strict=True)]
    levels = instructed.levels(base.query_ids)
    if spec.protocol == LEVELS:
        empty = [j for j in (1, 2, 3) if not (levels == j).any()]
        if empty:
            raise DataFileError(
                f"no evaluated query id holds 'v{empty[0]}': IFIR's level {empty[0]} has no query",
                file=paths["queries"],
                task=task,
            )
    return InstructedData(
        base.doc_ids,
        base.doc_texts,
        base.query_ids,
        texts,
        base.qrels,
        base.candidates,
        base.notes,
        levels=levels,
        groups=instructed.groups(base.query_ids),
    )


def _jsonl(path: Path, task: str, keys: tuple[str, ...]) -> list[tuple[int, dict[str, Any]]]:
    from embeval.errors import DataFileError
    from embeval.tasks.beir import _lines

    rows = []
    for number, line in _lines(path, task):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataFileError(f"malformed JSON: {err.msg} (column {err.colno})", file=path, line=number, task=task)
        if not isinstance(record, dict):
            raise DataFileError("a line must be a JSON object", file=path, line=number, task=task)
        for key in keys:
            if key not in record:
                raise DataFileError(f"missing field '{key}'", file=path, line=number, task=task)
        if not isinstance(record[keys[0]], str) or not record[keys[0]]:
            raise DataFileError(f"field '{keys[0]}' must be a non-empty string", file=path, line=number, task=task)
        rows.append((number, record))
    if not rows:
        raise DataFileError("no lines", file=path, task=task)
    return rows


def load_instructed(spec: TaskSpec, paths: Mapping[str, Path]) -> InstructionData:
    """A FollowIR split from BEIR's files, the instructions and the changed judgments, checked: every
    query an "-og" or "-changed" id with its counterpart and one instruction, every instruction and
    changed judgment naming a known query, every changed document a document of the corpus."""
    from embeval.errors import DataFileError
    from embeval.tasks.beir import load_retrieval, read_jsonl

    task = spec.name
    base = load_retrieval(
        paths["corpus"],
        paths["queries"],
        paths["qrels"],
        task,
        candidates=paths.get("candidates"),
        missing_documents=spec.params.missing_documents,
    )
    all_ids, _ = read_jsonl(paths["queries"], task, with_title=False)
    known = set(all_ids)
    for query in all_ids:
        if _pair_of(query)[0] is None:
            raise DataFileError(
                f"query id '{query}' ends neither in '-og' nor in '-changed' (FollowIR's queries come in pairs)",
                file=paths["queries"],
                task=task,
            )
    for query in all_ids:
        counterpart = _pair_of(query)[1]
        if counterpart not in known:
            which = "changed" if query.endswith(ORIGINAL) else "original"
            raise DataFileError(
                f"query '{query}' has no {which} instruction: no query '{counterpart}'",
                file=paths["queries"],
                task=task,
            )
    instructions: dict[str, str] = {}
    for number, record in _jsonl(paths["instructions"], task, ("query-id", "instruction")):
        query, text = record["query-id"], record["instruction"]
        if query not in known:
            raise DataFileError(
                f"query-id '{query}' is not in the queries file", file=paths["instructions"], line=number, task=task
            )
        if query in instructions:
            raise DataFileError(
                f"a second instruction of query '{query}'", file=paths["instructions"], line=number, task=task
            )
        if not isinstance(text, str):
            raise DataFileError(
                "field 'instruction' must be a string", file=paths["instructions"], line=number, task=task
            )
        instructions[query] = text
    missing = [q for q in all_ids if q not in instructions]
    if missing:
        raise DataFileError(
            f"{len(missing)} queries have no instruction (first: '{missing[0]}')", file=paths["instructions"], task=task
        )
    doc_row = {d: i for i, d in enumerate(base.doc_ids)}
    query_row = {q: i for i, q in enumerate(base.query_ids)}
    pairs, notes, seen = [], list(base.notes), set()
    for number, record in _jsonl(paths["changed"], task, ("query-id", "corpus-ids")):
        stem, documents = record["query-id"], record["corpus-ids"]
        if stem + ORIGINAL not in known:
            raise DataFileError(
                f"query-id '{stem}' names no query ('{stem}-og' is not in the queries file)",
                file=paths["changed"],
                line=number,
                task=task,
            )
        if stem in seen:
            raise DataFileError(f"query-id '{stem}' is listed twice", file=paths["changed"], line=number, task=task)
        seen.add(stem)
        if not isinstance(documents, list) or not all(isinstance(d, str) for d in documents):
            raise DataFileError(
                "field 'corpus-ids' must be a list of document ids", file=paths["changed"], line=number, task=task
            )
        unknown = [d for d in documents if d not in doc_row]
        if unknown:
            raise DataFileError(
                f"corpus-ids name {len(unknown)} document(s) not in the corpus (first: '{unknown[0]}')",
                file=paths["changed"],
                line=number,
                task=task,
            )
        if stem + ORIGINAL not in query_row or stem + CHANGED not in query_row or not documents:
            notes.append(
                f"{paths['changed']}: query '{stem}' is left out of p-MRR (a run without judgments, or no "
                "document), as MTEB leaves it out"
            )
            continue
        pairs.append(
            (stem, (query_row[stem + ORIGINAL], query_row[stem + CHANGED], tuple(doc_row[d] for d in documents)))
        )
    if not pairs:
        raise DataFileError("no query with changed judgments to compute p-MRR from", file=paths["changed"], task=task)
    texts = [_instructed(text, instructions[q]) for q, text in zip(base.query_ids, base.query_texts, strict=True)]
    return InstructionData(
        base.doc_ids,
        base.doc_texts,
        base.query_ids,
        texts,
        base.qrels,
        base.candidates,
        tuple(notes),
        base.absent,
        pairs=tuple(pair for _, pair in sorted(pairs, key=lambda item: item[0])),
    )


def _pair_of(query: str) -> tuple[str | None, str]:
    if query.endswith(ORIGINAL):
        stem = query[: -len(ORIGINAL)]
        return stem, stem + CHANGED
    if query.endswith(CHANGED):
        stem = query[: -len(CHANGED)]
        return stem, stem + ORIGINAL
    return None, ""


def _instructed(text: str, instruction: str) -> str:
    """A query as mteb embeds it with its instruction: its text, a space, the instruction."""
    return text + " " + instruction


KIND = InstructionRetrieval()
