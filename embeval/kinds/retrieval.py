"""Retrieval, as MTEB evaluates it (mteb 2.26): each query's best documents of a corpus by exact
search over the vectors, scored against graded relevance judgments.

Files (BEIR's layout; embeval.tasks.beir): `corpus` (corpus.jsonl: _id, title, text), `queries`
(queries.jsonl: _id, text) and `qrels` (qrels/SPLIT.tsv: query-id, corpus-id, score). Queries and
documents are exported as two lists (roles "query" and "document": TASK.query and TASK.document), so
an encoder can embed them with different prompts; a document is embedded as MTEB embeds it, its
title and text joined by a space. Keys: `similarity` ("cosine", the default, or "dot"), `depth`
(documents retrieved per query: 1000, MTEB's largest cut-off), `ignore_identical_ids` (drop the
document whose id equals the query's, as MTEB does for ArguAna, Quora and a few others),
`missing_documents` ("refuse", the default: a judgment naming a document that is not in the corpus is
an error; "count": taken as MTEB takes it, a relevant document never retrieved).

Figures: nDCG, MAP, Recall, Precision, MRR and HitRate at MTEB's cut-offs 1, 3, 5, 10, 20, 100, 1000,
means over the queries (MTEB rounds its means to 5 decimals; embeval keeps them whole and rounds only
what export-mteb writes); main figure nDCG@10. Ties are ranked as pytrec_eval ranks them (document id,
descending). The search streams the corpus from the vectors file block by block under the device's
memory budget (embeval.train.search): the corpus is never wholly in memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from embeval.stats import mean_of
from embeval.tasks.declaration import Declaration
from embeval.tasks.figures import Column, Figure, lookup
from embeval.tasks.kind import Kind, Line, ci_text, pct
from embeval.tasks.mteb_tasks import by_name
from embeval.tasks.spec import TaskSpec

CUTOFFS = (1, 3, 5, 10, 20, 100, 1000)
FAMILIES = (
    ("ndcg", "nDCG"),
    ("map", "MAP"),
    ("recall", "Recall"),
    ("precision", "P"),
    ("mrr", "MRR"),
    ("hit_rate", "HitRate"),
)
ROUNDED = ("ndcg", "map", "recall", "precision", "hit_rate")  # mteb rounds these means to 5 decimals
QUERY, DOCUMENT = "query", "document"
SUBQUERIES = "max_over_subqueries"  # embeval.evaluate.retrieval.SUBQUERIES: the figures' prefix
SET_KIND = "query_means"


def figure(name: str) -> Figure:
    family, k = name.split("_at_")
    words = dict(FAMILIES)[family]
    return Figure(name, f"{words}@{k}", False)


FIGURES = {f"{family}_at_{k}": figure(f"{family}_at_{k}") for family, _ in FAMILIES for k in CUTOFFS}


@dataclass(frozen=True)
class RetrievalParams:
    similarity: str = "cosine"
    depth: int = 1000
    ignore_identical_ids: bool = False
    missing_documents: str = "refuse"  # or "count" (embeval.tasks.beir.load_retrieval)
    subqueries: str | None = None  # reranking: "max", also scored merged with subqueries (SUBQUERIES)


def read_missing_documents(decl: Declaration) -> str:
    from embeval.tasks.beir import MISSING_DOCUMENTS

    return decl.take("missing_documents", default="refuse", choices=MISSING_DOCUMENTS)


def read_params(decl: Declaration) -> RetrievalParams:
    depth = decl.integer("depth", 1000)
    if depth < 10:
        raise decl.error(f"must be an integer >= 10 (nDCG@10 needs ten documents), got {depth}", "depth")
    return RetrievalParams(
        similarity=decl.take("similarity", default="cosine", choices=("cosine", "dot")),
        depth=depth,
        ignore_identical_ids=decl.take("ignore_identical_ids", (bool,), False),
        missing_documents=read_missing_documents(decl),
    )


def _mteb_figures(results: Mapping[str, Any]) -> dict[str, Any] | None:
    """The figures as mteb's make_score_dict names and rounds them (None: the results lack one)."""
    scores = {}
    for name in FIGURES:
        value = results.get(name)
        if not isinstance(value, (int, float)):
            return None
        scores[name] = round(value, 5) if name.split("_at_")[0] in ROUNDED else value
    scores["accuracy"] = scores["recall_at_1"]  # mteb's, for its multiple-choice tasks
    for name, value in results.items():
        if name.startswith("nauc_"):  # mteb's abstention figures, unrounded (NaN kept)
            scores[name] = float("nan") if value is None else value
    return scores


class Retrieval(Kind):
    query_role: ClassVar[str] = QUERY  # the role of the queries' list (instruction kinds: instructed queries)
    name = "retrieval"
    mteb_type = "Retrieval"  # MTEB's task type of its tasks (benchmark means per type)
    summary = "queries, a corpus and graded judgments (BEIR's files); exact search, MTEB's figures"
    formats = ("beir",)
    statistics = {SET_KIND: {name: mean_of(name) for name in FIGURES}}
    main = "ndcg_at_10"
    reranking = False
    streamed = (DOCUMENT,)  # searched block by block (retrieval), or its candidates' rows read (reranking)

    def file_keys(self, protocol: str | None) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
        return ("corpus", "queries", "qrels"), (), False

    def read_params(self, decl: Declaration, protocol: str | None) -> RetrievalParams:
        return read_params(decl)

    def load(self, spec: TaskSpec, paths: Mapping[str, Path]) -> Any:
        import logging

        from embeval.tasks.beir import load_retrieval

        data = load_retrieval(
            paths["corpus"],
            paths["queries"],
            paths["qrels"],
            spec.name,
            candidates=paths.get("candidates"),
            missing_documents=spec.params.missing_documents,
            quiet=by_name(spec),
        )
        if not by_name(spec):  # a task scored by name: its source said them, naming the dataset's files
            for note in data.notes:
                logging.getLogger("embeval").warning(f"{spec.name}: {note}")
        return data

    def roles(self, spec: TaskSpec) -> tuple[str, ...]:
        return (self.query_role, DOCUMENT)

    def sentences(self, spec: TaskSpec, data: Any) -> dict[str, list[str]]:
        return {
            self.query_role: list(dict.fromkeys(data.query_texts)),
            DOCUMENT: list(dict.fromkeys(data.doc_texts)),
        }

    def rows(self, spec: TaskSpec, data: Any, row_of: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
        import numpy as np

        return {
            self.query_role: np.array([row_of[self.query_role][t] for t in data.query_texts], dtype=np.int64),
            DOCUMENT: np.array([row_of[DOCUMENT][t] for t in data.doc_texts], dtype=np.int64),
        }

    def tables(self, spec: TaskSpec) -> tuple[str, ...]:
        return ()

    def least_budget(self, spec: TaskSpec, data: Any, dim: int, device: Any) -> tuple[int, str] | None:
        if self.reranking:  # candidates scored in pieces of a fixed size, not a search
            return None
        from embeval.train.search import least_bytes

        queries, documents = len(data.query_texts), len(data.doc_texts)
        depth = min(spec.params.depth, documents)
        what = f"its exact search of {queries} queries in {documents} documents of {dim} dimensions (top {depth})"
        return least_bytes(queries, dim, depth, documents, device), what

    def sizes(self, spec: TaskSpec, data: Any) -> str:
        return f"{len(data.query_ids)} queries, {len(data.doc_ids)} documents, {len(data.qrels[0])} judgments"

    def evaluate(self, ctx: Any) -> Any:
        from embeval.evaluate import retrieval

        params = ctx.task.params
        return retrieval.evaluate(
            ctx,
            ctx.task.headline.path,
            params.depth,
            params.similarity,
            params.ignore_identical_ids,
            reranking=self.reranking,
            subqueries=params.subqueries == "max",
        )

    def figures(self, spec: TaskSpec) -> tuple[Figure, ...]:
        main = FIGURES[self.main]
        return (main,) + tuple(f for name, f in FIGURES.items() if name != self.main)

    def lines(self, spec: TaskSpec, results: Mapping[str, Any], ci: Mapping[str, Any] | None) -> list[Line]:
        main = spec.headline
        out = [Line(f"{main.label} x100", pct(lookup(results, main.path)) + ci_text(ci, main.path))]
        for family, words in FAMILIES[:3] + FAMILIES[4:5]:
            values = " | ".join(pct(results.get(f"{family}_at_{k}")) for k in (1, 10, 100, 1000))
            out.append(Line(f"{words}@1 | @10 | @100 | @1000 x100", values))
        out.append(Line("queries | documents", f"{results.get('nqueries')} | {results.get('ndocs')}"))
        ties = results.get("tie_exposure")
        if isinstance(ties, Mapping):  # embeval.evaluate.ir_metrics.Ties; docs/mteb-by-name.md
            out.append(
                Line(
                    "queries exposed to ties: any figure | main | nAUC confidence",
                    f"{ties.get('order')} | {ties.get('main')} | {ties.get('confidence')} of {ties.get('queries')}",
                )
            )
        return out

    def columns(self, spec: TaskSpec) -> tuple[Column, ...]:
        if not spec.report.show:
            return ()
        main = spec.headline
        return (
            Column(
                spec.report.group or self.name,
                main.path,
                f"{main.label} x100",
                scale=100.0,
                header=spec.report.header,
                order=spec.report.order,
                measure=main.path,
                protocol=self.name,
                note=f"{main.label}, MTEB's protocol",
            ),
        )

    def mteb_scores(self, spec: TaskSpec, results: Mapping[str, Any]) -> dict[str, Any] | None:
        scores = _mteb_figures(results)
        if scores is None:
            return None
        merged = results.get(SUBQUERIES)
        if spec.params.subqueries == "max":  # mteb's max_over_subqueries_* figures
            found = _mteb_figures(merged) if isinstance(merged, Mapping) else None
            if found is None:
                return None
            scores.update({f"{SUBQUERIES}_{name}": value for name, value in found.items()})
        scores["main_score"] = scores[spec.headline.path.replace(".", "_")]
        return scores

    def unit_bytes(self, spec: TaskSpec, count: int, dim: int, config: Any) -> int:
        return 4 * count * dim


KIND = Retrieval()
