"""Instruction reranking as MTEB evaluates FollowIR (Core17, Robust04, News21 InstructionRetrieval:
mteb 2.26.24's type "InstructionReranking"): embeval.kinds.instruction_retrieval's protocol, each
query's candidates (a `candidates` file, as reranking's) ranked instead of the whole corpus.

Files: corpus, queries, qrels, candidates, instructions, changed. Keys: `similarity`. Figures: p-MRR
(the headline, MTEB's main score), the retrieval figures of every query and of each run.
"""

from __future__ import annotations

from embeval.kinds.instruction_retrieval import InstructionRetrieval


class InstructionReranking(InstructionRetrieval):
    name = "instruction-reranking"
    summary = "candidates of queries with an original and a changed instruction (FollowIR); p-MRR, MTEB's figures"
    statistics = {}  # its prediction sets are instruction retrieval's (the same set kind)
    protocols = ()  # FollowIR's only
    reranking = True


KIND = InstructionReranking()
