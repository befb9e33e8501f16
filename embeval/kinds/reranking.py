"""Reranking, as MTEB evaluates it (mteb 2.26): each query's candidate documents ranked by the
similarity of the vectors, scored against graded relevance judgments with MTEB's retrieval figures
(relevant documents that are not candidates still count in Recall's and MAP's denominators).

Files: BEIR's three (`corpus`, `queries`, `qrels`; see embeval.kinds.retrieval) and `candidates`, a
TSV with the header `query-id<TAB>corpus-id` and one line per candidate of a query (MTEB's
"top_ranked"). A query without candidates is kept and scores 0, as in MTEB. Keys: `similarity`
("cosine" or "dot"), `missing_documents` (as retrieval's), `subqueries` ("max": the queries whose ids
agree but for their last '_'-separated part are also scored as one query, each document at its best
score over them, as mteb's max_over_subqueries: the figures `max_over_subqueries.NAME`, MTEB's
`max_over_subqueries_NAME`, MindSmallReranking's main figure; their judgments must agree). Figures:
those of retrieval; main figure MAP@1000 (MTEB's for most reranking tasks; a task may choose
mrr_at_10 or ndcg_at_10 with `figure`).
"""

from __future__ import annotations

from typing import Any

from embeval.kinds.retrieval import SUBQUERIES, Retrieval, RetrievalParams, read_missing_documents
from embeval.tasks.declaration import Declaration
from embeval.tasks.figures import Figure
from embeval.tasks.spec import TaskSpec


class Reranking(Retrieval):
    name = "reranking"
    mteb_type = "Reranking"  # MTEB's task type of its tasks (benchmark means per type)
    summary = "queries with candidate documents and graded judgments; MTEB's reranking figures"
    statistics = {}  # its prediction sets are retrieval's (the same set kind)
    main = "map_at_1000"
    reranking = True

    def file_keys(self, protocol: str | None) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
        return ("corpus", "queries", "qrels", "candidates"), (), False

    def read_params(self, decl: Declaration, protocol: str | None) -> Any:
        return RetrievalParams(
            similarity=decl.take("similarity", default="cosine", choices=("cosine", "dot")),
            missing_documents=read_missing_documents(decl),
            subqueries=decl.take("subqueries", default=None, choices=("max",)),
        )

    def figures(self, spec: TaskSpec) -> tuple[Figure, ...]:
        own = super().figures(spec)
        if spec.params.subqueries != "max":
            return own
        merged = tuple(Figure(f"{SUBQUERIES}.{f.path}", f"{f.label} (max over subqueries)", False) for f in own)
        return (*own, *merged)


KIND = Reranking()
