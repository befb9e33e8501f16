"""Clustering of labelled documents, scored as MTEB scores it (embeval.evaluate.clustering, mteb 2.26.24).

Protocols:
- bootstrap (the default; mteb's AbsTaskClustering, all of MTEB(eng, v2)'s clustering): one file,
  `test`, one document a row with text and label columns. A sample of the documents is embedded
  (mteb's: `max_fraction` of them, 0.04 by default, or `max_documents`, or all with
  `embed_all = true`; drawn by random.Random(seed)); per level of the labels, n_experiments times,
  documents_per_experiment of them drawn with replacement are clustered by scikit-learn's
  MiniBatchKMeans into as many clusters as the level has labels, and scored by v-measure and
  adjusted mutual information. Only the sample's documents are exported: the draws depend on the
  number of documents and the seed only. Keys with mteb's defaults (mteb's attribute in brackets):
  max_fraction 0.04 (max_fraction_of_documents_to_embed), max_documents (max_document_to_embed),
  embed_all, documents_per_experiment 16384 (max_documents_per_cluster), n_experiments 10
  (n_clusters), batch_size 512 (k_mean_batch_size), max_depth (all levels), seed 42.
- sets (mteb's AbsTaskClusteringLegacy, e.g. WikiCitiesClustering): one file, `test`, with text,
  label and set columns; the documents of each set (in file order) are clustered by MiniBatchKMeans
  into as many clusters as the set has labels, and scored by v-measure. Keys: batch_size 500, seed 42.

Hierarchical labels (bootstrap): `levels = ["topic", "subtopic"]` names the columns of the levels,
coarsest first (an empty field: no label at that level and below), or, in JSONL, `label` holds a
list of labels, coarsest first (mteb's `labels` lists). A document without a label at a level is
left out of that level, as mteb does for integer labels (for string labels mteb 2.26 keeps such
documents as a class "-1" of that level; embeval does not). A level or set with one distinct label
is refused (mteb would count its v-measure 1).

Figures (fractions): v_measure (the headline), the mean over every experiment of every level
(bootstrap) or over the sets; ami (bootstrap). Prediction set: per embedded document its label code,
draw count and cluster in each experiment (bootstrap), or per document its label, cluster and set;
the bootstrap resamples documents (within each set) with each experiment's clusters fixed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from embeval.kinds.mteb_shared import figures_of, fractions_line, headline_column, lazy_statistic
from embeval.kinds.mteb_shared import score_fields as mteb_fields
from embeval.tasks.declaration import Declaration
from embeval.tasks.figures import Column, Figure
from embeval.tasks.kind import TEXT, Kind, Line
from embeval.tasks.spec import TaskSpec

BOOTSTRAP, SETS = "bootstrap", "sets"
PROTOCOL = "embeval.evaluate.clustering"
BOOTSTRAP_SET, SETS_SET = "mteb-clustering", "mteb-clustering-sets"  # prediction sets' kinds
BOOTSTRAP_KEYS = ("v_measure", "v_measure_std", "v_measures", "ami", "ami_std", "ami_scores")
SETS_KEYS = ("v_measure", "v_measure_std", "v_measures")


@dataclass(frozen=True)
class BootstrapParams:
    """mteb's AbsTaskClustering attributes (see the module docstring for their mteb names)."""

    max_fraction: float | None = 0.04
    max_documents: int | None = None
    documents_per_experiment: int = 16_384
    n_experiments: int = 10
    batch_size: int = 512
    max_depth: int | None = None
    seed: int = 42
    levels: tuple[str, ...] | None = None

    def embedded(self, n: int) -> np.ndarray:
        """The documents (rows of the file) mteb embeds of n, in its order."""
        return self.draw(n)[0]

    def draw(self, n: int) -> tuple[np.ndarray, Any]:
        """(the documents mteb embeds, the random.Random that drew them, to go on drawing with)."""
        import random

        from embeval.evaluate.clustering import embedded_documents

        rng = random.Random(self.seed)
        return embedded_documents(n, rng, self.max_fraction, self.max_documents), rng


@dataclass(frozen=True)
class SetParams:
    """mteb's AbsTaskClusteringLegacy evaluator's settings."""

    batch_size: int = 500
    seed: int = 42


@dataclass
class Documents:
    """A clustering task's documents in file order: texts, label codes per level ((levels, n), -1
    where a document has no label at that level) and the label values of each level; for the sets
    protocol, each document's set index and the sets' names."""

    texts: list[str]
    codes: np.ndarray
    labels: list[list[str]]
    sets: np.ndarray | None = None
    set_names: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)

    def sentences(self) -> list[str]:
        return self.texts


def _optional_int(decl: Declaration, key: str, least: int) -> int | None:
    return decl.integer(key, None, least)


def _int(decl: Declaration, key: str, default: int, least: int) -> int:
    value = _optional_int(decl, key, least)
    return default if value is None else value


def read_bootstrap_keys(decl: Declaration) -> BootstrapParams:
    chosen = [key for key in ("max_fraction", "max_documents", "embed_all") if decl.has(key)]
    if len(chosen) > 1:
        raise decl.error(f"{' and '.join(chosen)} both say how many documents to embed; keep one", chosen[1])
    max_fraction = decl.take("max_fraction", (float,), 0.04)
    if not 0 < max_fraction <= 1:
        raise decl.error(f"must be a fraction in (0, 1], got {max_fraction}", "max_fraction")
    max_documents = _optional_int(decl, "max_documents", 1)
    embed_all = decl.take("embed_all", (bool,), False)
    if max_documents is not None or embed_all:
        max_fraction = None
    return BootstrapParams(
        max_fraction=max_fraction,
        max_documents=max_documents,
        documents_per_experiment=_int(decl, "documents_per_experiment", 16_384, 1),
        n_experiments=_int(decl, "n_experiments", 10, 1),
        batch_size=_int(decl, "batch_size", 512, 1),
        max_depth=_optional_int(decl, "max_depth", 1),
        seed=_int(decl, "seed", 42, 0),
        levels=decl.strings("levels", None),
    )


class Clustering(Kind):
    name = "clustering"
    mteb_type = "Clustering"  # MTEB's task type of its tasks (benchmark means per type)
    summary = "labelled documents; MiniBatchKMeans scored by v-measure (MTEB's bootstrap or per-set protocol)"
    protocols = (BOOTSTRAP, SETS)
    statistics = {
        BOOTSTRAP_SET: {"v_measure": lazy_statistic(PROTOCOL, "bootstrap.v_measure", False, centred=True)},
        SETS_SET: {"v_measure": lazy_statistic(PROTOCOL, "sets.v_measure", True, centred=True)},
    }

    def column_keys(self, protocol: str | None) -> tuple[str, ...]:
        return ("text", "label", "set") if protocol == SETS else ("text", "label")

    def read_params(self, decl: Declaration, protocol: str | None) -> BootstrapParams | SetParams:
        if protocol == SETS:
            return SetParams(batch_size=_int(decl, "batch_size", 500, 1), seed=_int(decl, "seed", 42, 0))
        return read_bootstrap_keys(decl)

    def load(self, spec: TaskSpec, paths: Mapping[str, Path]) -> Documents:
        return read_documents(spec, paths["test"])

    def sentences(self, spec: TaskSpec, data: Documents) -> dict[str, list[str]]:
        if spec.protocol == SETS:
            return {TEXT: list(dict.fromkeys(data.texts))}
        return {TEXT: list(dict.fromkeys(data.texts[i] for i in spec.params.embedded(len(data.texts))))}

    def rows(self, spec: TaskSpec, data: Documents, row_of: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
        order = range(len(data.texts)) if spec.protocol == SETS else spec.params.embedded(len(data.texts))
        return {"documents": (np.array([row_of[TEXT][data.texts[i]] for i in order], dtype=np.int64), None)}

    def sizes(self, spec: TaskSpec, data: Documents) -> str:
        n = len(data.texts)
        if spec.protocol == SETS:
            return f"{n} documents in {len(data.set_names)} sets"
        levels = ", ".join(str(len(labels)) for labels in data.labels)
        return f"{n} documents ({len(spec.params.embedded(n))} embedded), labels per level {levels}"

    def figures(self, spec: TaskSpec) -> tuple[Figure, ...]:
        if spec.protocol == SETS:
            return figures_of([("v_measure", "v-measure, mean over the sets")])
        return figures_of(
            [("v_measure", "v-measure, mean over the experiments"), ("ami", "AMI, mean over the experiments")]
        )

    def normalizes(self, spec: TaskSpec) -> bool:
        return False

    def evaluate(self, ctx: Any) -> dict[str, Any]:
        return evaluate_sets(ctx) if ctx.task.protocol == SETS else evaluate_bootstrap(ctx)

    def lines(self, spec: TaskSpec, results: Mapping[str, Any], ci: Mapping[str, Any] | None) -> list[Line]:
        if spec.protocol == SETS:
            return [
                fractions_line(f"v-measure x100 (MTEB, mean of {results.get('sets')} sets)", results, ["v_measure"], ci)
            ]
        lines = [fractions_line("v-measure | AMI x100 (MTEB)", results, ["v_measure", "ami"], ci)]
        by_level = results.get("v_measures")
        if isinstance(by_level, Mapping) and len(by_level) > 1:
            for level, values in by_level.items():
                lines.append(fractions_line(f"{level} v-measure", {"mean": float(np.mean(values))}, ["mean"]))
        return lines

    def columns(self, spec: TaskSpec) -> tuple[Column, ...]:
        if spec.protocol == SETS:
            return headline_column(spec, "mteb-clustering", "v-measure, mean over the sets (mteb's per-set protocol)")
        p = spec.params
        return headline_column(
            spec, "mteb-clustering", f"{spec.headline.label} ({p.n_experiments} experiments per level)"
        )

    def mteb_scores(self, spec: TaskSpec, results: Mapping[str, Any]) -> dict[str, Any] | None:
        return mteb_fields(spec, results, SETS_KEYS if spec.protocol == SETS else BOOTSTRAP_KEYS)


def _level_values(value: Any, path: Path, spec: TaskSpec, line: int) -> list[str]:
    """A document's labels, coarsest first: a JSON list (jsonl) or one label."""
    from embeval.errors import DataFileError
    from embeval.tasks import tabular

    column = dict(spec.column_names).get("label", "label")
    if isinstance(value, list):
        if not value:
            raise DataFileError(f"{column} is an empty list", file=path, task=spec.name, line=line)
        return [tabular.label_field(v, column, path, spec.name, line) for v in value]
    return [tabular.label_field(value, column, path, spec.name, line)]


def read_documents(spec: TaskSpec, path: Path) -> Documents:
    """The documents of a clustering task's file, their labels per level checked: each level (each
    set) must hold two labels or more."""
    from embeval.errors import DataFileError
    from embeval.tasks import tabular
    from embeval.tasks.files import join_tokens
    from embeval.tasks.samples import label_order

    names = dict(spec.column_names)
    levels = spec.params.levels if spec.protocol == BOOTSTRAP else None
    columns = ("text",) + (levels if levels else ("label",)) + (("set",) if spec.protocol == SETS else ())
    tokenize = join_tokens if spec.tokenization == "whitespace" else (lambda text: text)
    texts, per_document, sets, lines = [], [], [], []
    for line, row in tabular.read_rows(path, spec.format, columns, names, spec.name):
        texts.append(tokenize(tabular.text_field(row["text"], names.get("text", "text"), path, spec.name, line)))
        if levels:
            values = [row[c] if row[c] == "" else tabular.label_field(row[c], c, path, spec.name, line) for c in levels]
            while values and values[-1] == "":
                values.pop()
            if not values or "" in values:
                missing = levels[values.index("") if "" in values else 0]
                raise DataFileError(
                    f"no label in {missing!r} (a document has labels from the first level on, without a gap)",
                    file=path,
                    task=spec.name,
                    line=line,
                )
        elif spec.protocol == SETS:
            values = [tabular.label_field(row["label"], names.get("label", "label"), path, spec.name, line)]
        else:
            values = _level_values(row["label"], path, spec, line)
        per_document.append(values)
        lines.append(line)
        if spec.protocol == SETS:
            sets.append(tabular.label_field(row["set"], names.get("set", "set"), path, spec.name, line))
    depth = max(len(values) for values in per_document)
    if spec.protocol == BOOTSTRAP and spec.params.max_depth is not None:
        depth = min(depth, spec.params.max_depth)
    codes = np.full((max(len(v) for v in per_document), len(texts)), -1, dtype=np.int64)
    labels = []
    for level in range(codes.shape[0]):
        present = [i for i, values in enumerate(per_document) if len(values) > level]
        values = label_order({per_document[i][level] for i in present})
        ids = {value: code for code, value in enumerate(values)}
        codes[level, present] = [ids[per_document[i][level]] for i in present]
        labels.append(values)
        if level < depth and len(values) < 2 and spec.protocol == BOOTSTRAP:
            raise DataFileError(
                f"level {level} of the labels has one label ({values[0]!r}); clustering needs two or more",
                file=path,
                task=spec.name,
            )
    data = Documents(texts, codes, labels, files=[path])
    if spec.protocol == BOOTSTRAP:
        _check_sample(spec, data, depth, path)
    if spec.protocol == SETS:
        data.set_names = list(dict.fromkeys(sets))
        index = {name: i for i, name in enumerate(data.set_names)}
        data.sets = np.array([index[name] for name in sets], dtype=np.int64)
        for i, name in enumerate(data.set_names):
            members = np.flatnonzero(data.sets == i)
            distinct = np.unique(codes[0, members])
            if len(distinct) < 2:
                raise DataFileError(
                    f"set {name!r} has one label ({labels[0][distinct[0]]!r}); clustering needs two or more",
                    file=path,
                    task=spec.name,
                    line=lines[members[0]],
                )
    return data


def _check_sample(spec: TaskSpec, data: Documents, depth: int, path: Path) -> None:
    """The documents embedded must hold two labels or more at every level clustered."""
    from embeval.errors import DataFileError

    embedded = spec.params.embedded(len(data.texts))
    more = "embed more with max_fraction, max_documents or embed_all"
    if len(embedded) == 0:
        raise DataFileError(f"{len(data.texts)} documents: the sample embeds none; {more}", file=path, task=spec.name)
    for level in range(depth):
        distinct = np.unique(data.codes[level, embedded])
        if len(distinct[distinct >= 0]) < 2:
            raise DataFileError(
                f"the {len(embedded)} documents embedded hold one label at level {level}; {more}",
                file=path,
                task=spec.name,
            )


def evaluate_bootstrap(ctx: Any) -> dict[str, Any]:
    """mteb's bootstrap protocol on the embedded documents, and its prediction set (scikit-learn on one
    thread: MiniBatchKMeans's small batches ran 16x faster so on a shared machine, the same
    clusterings; bench/mteb_threads.py; the experiments side by side on the run's threads)."""
    import torch
    from threadpoolctl import threadpool_limits

    from embeval.evaluate import clustering
    from embeval.formats.predictions import PredictionSet

    p, data = ctx.task.params, ctx.data
    documents, rng = p.draw(len(data.texts))
    labels = [[int(code) for code in data.codes[:, j] if code >= 0] for j in documents]
    run_threads = torch.get_num_threads()  # the run's: threadpool_limits(1) sets torch's to 1 as well
    with threadpool_limits(1):
        figures, arrays = clustering.cluster_documents(
            ctx.table.cpu().numpy()[ctx.rows["documents"][0]],
            labels,
            rng=rng,
            seed=p.seed,
            cluster_size=p.documents_per_experiment,
            n_experiments=p.n_experiments,
            batch_size=p.batch_size,
            max_depth=p.max_depth,
            task=ctx.task.name,
            threads=run_threads,
        )
    order = "embedded documents in mteb's sample order; one column per experiment, levels in turn"
    ctx.keep("", PredictionSet(BOOTSTRAP_SET, {"documents": documents, **arrays}, ("v_measure",), order))
    return dict(figures, documents=len(data.texts), embedded=len(documents))


def evaluate_sets(ctx: Any) -> dict[str, Any]:
    """mteb's per-set protocol, and its prediction set (scikit-learn on one thread, as above)."""
    from threadpoolctl import threadpool_limits

    from embeval.evaluate import clustering
    from embeval.formats.predictions import PredictionSet

    p, data = ctx.task.params, ctx.data
    table = ctx.table.cpu().numpy()[ctx.rows["documents"][0]]
    members = [np.flatnonzero(data.sets == i) for i in range(len(data.set_names))]
    with threadpool_limits(1):
        figures, arrays = clustering.set_clustering(
            [(table[m], data.codes[0, m]) for m in members], seed=p.seed, batch_size=p.batch_size, task=ctx.task.name
        )
    ctx.keep("", PredictionSet(SETS_SET, arrays, ("v_measure",), "documents set by set, file order within a set"))
    return dict(figures, sets=len(members), documents=len(data.texts))


KIND = Clustering()
