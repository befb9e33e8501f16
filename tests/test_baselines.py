"""Published baselines: every figure has a source and says how it was computed; the report shows them as
extra rows, marks each figure computed differently from its column, and never mixes protocols silently."""

import csv
import io
import json
from collections import Counter
from pathlib import Path

import pytest
from reliability_helpers import refused

from embeval.errors import EmbevalError
from embeval.formats.results import FORMAT, FORMAT_VERSION
from embeval.reports import baselines
from embeval.reports import html as html_report
from embeval.reports import tables as report
from embeval.tasks.registry import TASKS

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "example" / "results-minilm.json"
# Conneau and Kiela (2018), Tables 3 and 4, as copied from the paper (its header comments say how).
SENTEVAL_PAPER = Path(__file__).resolve().parent / "reference" / "senteval_paper_2018.tsv"
STS = ("STS12", "STS13", "STS14", "STS15", "STS16")
CLASSIFICATION = ("MR", "CR", "SUBJ", "MPQA", "SST2", "SST5", "TREC", "MRPC", "SICKEntailment", "SNLI")
# The one printed average that its row's figures do not give: Sentence-BERT's Table 1 prints 74.89 for
# SBERT-NLI-base, whose seven figures average 74.86 (SimCSE's Table B.2 repeats both).
PRINTED_AVERAGE_DIFFERS = {("sbert", "Table 1", "sbert-nli-base"): 0.03}
# The SentEval paper's rows and the baseline each is recorded under, with the classifier the row states (one
# encoder, one baseline: GloVe's LogReg, MLP and Table 4 rows are one bag of words under three protocols).
PAPER_ROWS = {
    "GloVe LogReg": ("senteval-glove-bow", "logreg"),
    "GloVe MLP": ("senteval-glove-bow", "mlp"),
    "fastText LogReg": ("senteval-fasttext-bow", "logreg"),
    "fastText MLP": ("senteval-fasttext-bow", "mlp"),
    "SkipThought": ("senteval-skipthought", None),
    "InferSent": ("senteval-infersent", None),
    "SOTA": ("senteval-sota", None),
    "GloVe BoW": ("senteval-glove-bow", None),
    "fastText BoW": ("senteval-fasttext-bow", None),
    "SkipThought-LN": ("senteval-skipthought-ln", None),
    "Char-phrase": ("senteval-char-phrase", None),
    "PP-Proj": ("senteval-pp-proj", None),
}
# The systems the paper's footnotes attribute its supervised (no transfer) figures to, per table and column.
ADASENT, BLSTM, TFKLD = (
    "AdaSent (Zhao et al., 2015)",
    "BLSTM-2DCNN (Zhou et al., 2016)",
    "TF-KLD (Ji and Eisenstein, 2013)",
)
FOOTNOTE_SYSTEMS = {
    "3": {
        **dict.fromkeys(("MR", "CR", "SUBJ", "MPQA"), ADASENT),
        **dict.fromkeys(("SST2", "SST5", "TREC"), BLSTM),
        **dict.fromkeys(("MRPC_acc", "MRPC_f1"), TFKLD),
        "SICKEntailment": "Illinois-LH (Lai and Hockenmaier, 2014)",
    },
    "4": {**dict.fromkeys(STS, "PP-Proj (Wieting et al., 2015)"), "SICKRelatedness": "Tree-LSTM (Tai et al., 2015)"},
}


def test_every_figure_has_a_source_and_its_protocol():
    data = json.loads(baselines.DATA.read_text())
    names, sources, figures = baselines.read()
    assert len(figures) > 200
    for group in data["groups"]:
        assert group["source"] in sources and group["table"]
        assert group["scale"] in (1, 100)
        assert set(group["rows"]) <= set(names)
    for f in figures:
        where = (f.baseline, f.task, f.source, f.table)
        assert f.protocol in ("cosine", "regressor", "classifier", "supervised"), where
        # A task-specific supervised system (no transfer) always names the system its source attributes.
        assert (f.protocol == "supervised") == bool(f.system), where
        if f.task in STS:
            assert f.protocol in ("cosine", "supervised") and f.metric in ("pearson", "spearman"), where
            assert f.aggregation in ("mean", "wmean", "pooled"), where
        elif f.task in ("STSBenchmark", "SICKRelatedness"):
            assert f.protocol in ("cosine", "regressor", "supervised") and f.metric in ("pearson", "spearman"), where
            assert f.split == "test", where
        else:
            assert f.task in CLASSIFICATION, where
            assert f.protocol in ("classifier", "supervised") and f.metric in ("accuracy", "f1"), where
            if f.protocol == "classifier":
                # Unset only where the source does not state it, and the group's note says so.
                assert f.classifier in ("logreg", "mlp") or "do not state the classifier" in f.note, where
        assert 0 < f.value <= 100, where
    assert {f.source for f in figures} == set(sources)
    labels = [entry["label"] for entry in names.values()]
    assert len(set(labels)) == len(labels)  # a report's rows are told apart by their labels
    for name, entry in names.items():
        assert entry["label"] and (isinstance(entry["dim"], int) or entry["dim"] is None)
        assert any(f.baseline == name for f in figures), name


def test_copied_figures_give_the_printed_averages():
    """Each row's figures, averaged, give the Avg. its table prints (to its rounding): a check of the copying."""
    data = json.loads(baselines.DATA.read_text())
    checked = 0
    for group in data["groups"]:
        for name, printed in group.get("averages", {}).items():
            values = list(group["rows"][name].values())
            tolerance = PRINTED_AVERAGE_DIFFERS.get((group["source"], group["table"], name), 0.0) + 0.005 + 1e-9
            assert abs(sum(values) / len(values) - printed) <= tolerance, (group["table"], name)
            checked += 1
    assert checked == 30


def rows_of(table):
    return {row[0].text: row for row in table.rows}


def test_rows_match_the_columns_protocol_and_mark_the_rest():
    tables, _ = report.build([EXAMPLE], published=["simcse-unsup-bert-base", "sbert-nli-base", "infersent1"])
    by_key = {t.key: t for t in tables}
    sts = rows_of(by_key["sts"])
    simcse = [c.value for c in sts["unsup. SimCSE-BERT-base [published]"][2:]]
    assert simcse == pytest.approx([68.40, 82.41, 74.38, 80.91, 78.56, 76.85, 72.23, 76.2486], abs=1e-4)
    assert not any(c.mark for c in sts["unsup. SimCSE-BERT-base [published]"][2:])
    # SBERT's STS-B: its own pooled-table figure (77.03), not SimCSE's wmean re-evaluation (76.98).
    assert sts["SBERT-NLI-base [published]"][7].value == pytest.approx(77.03)
    infersent = sts["InferSent1 (GloVe) [published]"]
    assert [c.value for c in infersent[2:7]] == [None] * 5 and infersent[9].value is None
    assert infersent[7].mark and infersent[8].mark  # the supervised regressor's figures, in cosine columns
    note = next(n for n in by_key["sts"].notes if n.startswith("\u2020 InferSent1"))
    assert "SentEval's supervised regressor, not cosine" in note and "Pearson, not Spearman" in note
    assert any("Gao, Yao and Chen (2021), Table 5" in n for n in by_key["sts"].notes)
    normalized = rows_of(by_key["sts-normalized"])["unsup. SimCSE-BERT-base [published]"]
    assert all(c.mark for c in normalized[2:])
    transfer = rows_of(by_key["transfer-logreg"])
    header = by_key["transfer-logreg"].header
    infersent = dict(zip(header, transfer["InferSent1 (GloVe) [published]"]))
    assert (infersent["MR"].value, infersent["MRPC F1"].value, infersent["SICK-R"].value) == (81.1, 83.1, 88.4)
    assert not any(c.mark for c in transfer["InferSent1 (GloVe) [published]"][2:])
    simcse = dict(zip(header, transfer["unsup. SimCSE-BERT-base [published]"]))
    assert simcse["MRPC F1"].value is None  # an accuracy never stands in for an F1
    assert simcse["STS-B"].mark and simcse["MR"].value == 81.18 and not simcse["MR"].mark
    # No figure fits the regressor's columns; SBERT's row still takes its own paper's (Table 1) over SimCSE's.
    assert dict(zip(header, transfer["SBERT-NLI-base [published]"]))["STS-B"].value == 77.03
    mlp = dict(zip(header, rows_of(by_key["transfer-mlp"])["InferSent1 (GloVe) [published]"]))
    assert mlp["MR"].mark and not mlp["SICK-R"].mark
    assert "logistic regression, not MLP" in " ".join(by_key["transfer-mlp"].notes)


def test_wmean_figures_do_not_stand_for_pooled_ones_unmarked():
    column = {"task": "STS12", "metric": "spearman", "protocol": "cosine", "aggregation": "pooled"}
    _, _, figures = baselines.read()
    wmean_only = [f for f in figures if f.baseline == "simcse-sup-bert-base" and f.aggregation == "wmean"]
    figure, differ = baselines.pick(column, wmean_only)
    assert figure.value == 70.90 and differ == ["weighted mean over subsets, not all pairs pooled"]
    figure, differ = baselines.pick(column, [f for f in figures if f.baseline == "simcse-sup-bert-base"])
    assert figure.value == 75.30 and differ == []


def test_names_sources_and_unknown_names(cli):
    assert baselines.resolve("sbert-nli-base, simcse-unsup-bert-base") == ["sbert-nli-base", "simcse-unsup-bert-base"]
    assert "simcse-sup-roberta-large" in baselines.resolve("simcse") and "sbert-nli-base" in baselines.resolve("simcse")
    assert set(baselines.resolve("senteval")) == {name for name, _ in PAPER_ROWS.values()}
    assert baselines.resolve("senteval") == [  # in the data file's order
        "senteval-glove-bow",
        "senteval-fasttext-bow",
        "senteval-skipthought",
        "senteval-skipthought-ln",
        "senteval-infersent",
        "senteval-char-phrase",
        "senteval-pp-proj",
        "senteval-sota",
    ]
    with pytest.raises(EmbevalError, match="known: simcse-unsup-bert-base, .*infersent1"):
        baselines.resolve("simcse-bert")
    refused(cli("report", EXAMPLE, "--baselines", "glove"), "--baselines", "unknown baseline 'glove'", "glove-avg")
    for fmt, mark in (("markdown", "72.23\u2020"), ("latex", "72.23$^\\dagger$"), ("csv", ",yes\n")):
        result = cli("report", EXAMPLE, "--baselines", "simcse-unsup-bert-base", "--format", fmt, "--no-ci")
        assert result.exit_code == 0, result.stderr
        assert "unsup. SimCSE-BERT-base [published]" in result.stdout and mark in result.stdout


def paper_tables():
    """The reference copy of the paper's tables: (its header comments as one text, [(table, model, group,
    column, printed figure)])."""
    comments, cells, header = [], [], None
    for line in SENTEVAL_PAPER.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            comments.append(line.lstrip("# "))
            continue
        fields = line.split("\t")
        if fields[0] == "table":
            header = fields
            continue
        row = dict(zip(header, fields, strict=True))
        cells += [(row["table"], row["model"], row["group"], column, row[column]) for column in header[3:]]
    return " ".join(comments), cells


def expected_figure(table, model, group, column, printed):
    """How the paper's header comments say a printed figure was computed, as a Figure's fields."""
    baseline, classifier = PAPER_ROWS[model]
    supervised = group == "supervised_no_transfer"
    task, metric = {"MRPC_acc": ("MRPC", "accuracy"), "MRPC_f1": ("MRPC", "f1")}.get(column, (column, "accuracy"))
    aggregation = split = None
    if table == "3":
        protocol = "classifier"
    elif task in STS:
        protocol, metric, aggregation = "cosine", "pearson", "mean"
    else:
        protocol, metric, split = "regressor", "pearson", "test"
    if supervised:
        protocol, classifier = "supervised", None
    system = FOOTNOTE_SYSTEMS[table][column] if supervised else None
    return (baseline, f"Table {table}", task, metric, float(printed), protocol, classifier, aggregation, split, system)


def test_every_figure_of_the_senteval_paper_is_recorded_as_printed():
    """Each figure of the paper's Tables 3 and 4 (the reference copy) is in baselines.json exactly once, with its
    task, metric, value and protocol marks; "-" (not reported) is absent; nothing else is recorded for it."""
    comments, cells = paper_tables()
    assert {group for _, _, group, _, _ in cells} == {"transfer", "supervised_no_transfer"}
    for systems in FOOTNOTE_SYSTEMS.values():
        for system in systems.values():
            assert system in comments, system  # the footnotes as the reference copy names them
    expected = Counter(expected_figure(*cell) for cell in cells if cell[4] != "-")
    assert sum(expected.values()) == len(cells) - 7 == 105
    _, sources, figures = baselines.read()
    recorded = Counter(
        (f.baseline, f.table, f.task, f.metric, f.value, f.protocol, f.classifier, f.aggregation, f.split, f.system)
        for f in figures
        if f.source == "senteval"
    )
    assert recorded == expected
    title = "SentEval: An Evaluation Toolkit for Universal Sentence Representations"
    assert title in comments and sources["senteval"].startswith(f"Conneau and Kiela (2018). {title}. LREC 2018")


def paper_results(path):
    """A small results file with every task of the paper's tables and both classifiers (its own figures are
    made up: what is tested is the published rows beside them)."""
    tasks = {}
    for i, name in enumerate(("MR", "CR", "SUBJ", "MPQA", "SST2", "SST5", "TREC", "SICKEntailment")):
        run = {"devacc": 60.0 + i, "acc": 60.0 + i}
        tasks[name] = {"kind": "classification", "results": dict(run, classifier="logreg", logreg=run, mlp=run)}
    run = {"devacc": 70.0, "acc": 70.0, "f1": 80.0}
    tasks["MRPC"] = {"kind": "pair-classification", "results": dict(run, classifier="logreg", logreg=run, mlp=run)}
    for name in ("SICKRelatedness", "STSBenchmark"):
        tasks[name] = {
            "kind": "relatedness",
            "results": {"pearson": 0.7, "spearman": 0.69, "cosine": {"spearman": 0.6}},
        }
    for name in STS:
        figures = {"mean": 0.5, "wmean": 0.51, "pooled": 0.52}
        tasks[name] = {"kind": "sts", "results": {"all": {"spearman": figures, "pearson": figures}}}
    for entry in tasks.values():
        entry["vectors"] = {"dim": 16}
    record = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "vectors": {"file": "/x/small.h5", "dim": 16},
        "config": {"classifier": {"nhid": 0}},
        "tasks": tasks,
    }
    path.write_text(json.dumps(record))
    return path


def row_of(table, label):
    return dict(zip(table.header, rows_of(table)[label]))


def header_of(column):
    """The report's header of a column of the paper's tables."""
    return {"MRPC_acc": "MRPC", "MRPC_f1": "MRPC F1"}.get(column) or TASKS[column].label


def test_senteval_paper_rows_take_their_own_protocols_figures(tmp_path):
    _, cells = paper_tables()
    printed = {(model, header_of(column)): value for _, model, _, column, value in cells}
    tables, _ = report.build([paper_results(tmp_path / "small.json")], published=baselines.resolve("senteval"))
    by_key = {t.key: t for t in tables}
    logreg, mlp, sts = by_key["transfer-logreg"], by_key["transfer-mlp"], by_key["sts"]
    columns = logreg.header[2:]
    # Table 3's nine tasks with MRPC's F1, then Table 4's SICK-R and STS-B (SentEval's regressor).
    assert len(columns) == 12 and columns[-2:] == ["SICK-R", "STS-B"]

    # Bags of words: each classifier's table holds the paper's row of that classifier; SICK-R and STS-B are
    # Table 4's regressor figures: all computed as their columns are, so none is marked.
    for table, model, label in (
        (logreg, "GloVe LogReg", "GloVe BoW"),
        (mlp, "GloVe MLP", "GloVe BoW"),
        (logreg, "fastText LogReg", "fastText BoW"),
        (mlp, "fastText MLP", "fastText BoW"),
    ):
        row = row_of(table, f"{label} [published]")
        assert row["dim"].text is None  # the paper's tables give no dimension
        for column in columns:
            source = model if column not in ("SICK-R", "STS-B") else f"{label}"
            assert row[column].value == float(printed[(source, column)]) and not row[column].mark, (model, column)

    # InferSent and SkipThought: the rows do not state the classifier, so their figures are marked in both tables.
    for table, classifier in ((logreg, "logistic regression"), (mlp, "MLP")):
        infersent = row_of(table, "InferSent [published]")
        for column in columns:
            figure = float(printed[("InferSent", column)])
            assert infersent[column].value == figure and infersent[column].mark == (column not in ("SICK-R", "STS-B"))
        note = next(n for n in table.notes if n.startswith("\u2020 InferSent [published]"))
        assert f"MR: the source does not state the classifier; the column's is {classifier};" in note
        skipthought = row_of(table, "SkipThought (SentEval paper) [published]")
        assert printed[("SkipThought", "SST5")] == "-" and skipthought["SST5"].value is None
        assert skipthought["SICK-R"].value is None  # Table 4's SkipThought-LN is its own row
        assert row_of(table, "SkipThought-LN [published]")["SICK-R"].value == float(
            printed[("SkipThought-LN", "SICK-R")]
        )

    # SOTA: task-specific supervised systems, labelled so, every figure marked, each column's system named.
    label = "SOTA (supervised, no transfer) [published]"
    sota = row_of(logreg, label)
    assert row_of(mlp, label)["MR"].value == sota["MR"].value
    for column in columns[:-2]:
        assert sota[column].value == float(printed[("SOTA", column)]) and sota[column].mark, column
    assert sota["SICK-R"].value is None and sota["STS-B"].value is None
    named = {}
    for column in columns[:-2]:
        paper_column = {"MRPC": "MRPC_acc", "MRPC F1": "MRPC_f1", "SICK-E": "SICKEntailment"}.get(column, column)
        named.setdefault(FOOTNOTE_SYSTEMS["3"][paper_column], []).append(column)
    systems = "; ".join(f"{', '.join(headers)}: {system}" for system, headers in named.items())
    assert (
        f"{label}: not sentence embeddings but task-specific systems trained on each task itself (no transfer), "
        f"as the source attributes them: {systems}." in logreg.notes
    )
    assert "MR: a task-specific supervised system (no transfer), not a trained classifier" in " ".join(logreg.notes)

    # Table 4: STS12-16 are means of per-subset Pearson, marked in the pooled-Spearman columns; PP-Proj's row
    # is supervised, its SICK-R figure Tree-LSTM's.
    infersent = row_of(sts, "InferSent [published]")
    assert [infersent[y].value for y in STS] == [float(printed[("InferSent", y)]) for y in STS]
    assert all(infersent[y].mark for y in STS)
    note = next(n for n in sts.notes if n.startswith("\u2020 InferSent [published]"))
    assert "STS12: Pearson, not Spearman; mean over subsets, not all pairs pooled;" in note
    label = "PP-Proj (supervised, no transfer) [published]"
    pp = row_of(sts, label)
    assert printed[("PP-Proj", "STS16")] == "-" and pp["STS16"].value is None
    assert [pp[y].value for y in STS[:4]] == [float(printed[("PP-Proj", y)]) for y in STS[:4]]
    assert all(pp[y].mark for y in STS[:4]) and pp["SICK-R"].value == float(printed[("PP-Proj", "SICK-R")])
    assert any(
        n.startswith(label)
        and n.endswith(
            "STS12, STS13, STS14, STS15: PP-Proj (Wieting et al., 2015); SICK-R: Tree-LSTM (Tai et al., 2015)."
        )
        for n in sts.notes
    )
    assert row_of(logreg, label)["SICK-R"].mark  # Tree-LSTM is not SentEval's regressor on embeddings
    assert row_of(sts, "Charagram-phrase [published]")["STS16"].value is None
    # Every published row keeps the "[published]" suffix the HTML page styles and plots by.
    for table in tables:
        for row in table.rows[1:]:
            assert row[0].text.endswith("[published]"), row[0].text
    assert f'<tr class="published"><td>{label}</td><td>–</td>' in html_report.table_html(sts)


def test_report_command_shows_the_senteval_rows(tmp_path, cli):
    _, cells = paper_tables()
    printed = {(model, header_of(column)): value for _, model, _, column, value in cells}
    path = paper_results(tmp_path / "small.json")
    result = cli("report", path, "--baselines", "senteval", "--no-ci")
    assert result.exit_code == 0, result.stderr
    section = result.stdout.split("### Transfer tasks (logistic regression)")[1].split("###")[0]
    header = next(line for line in section.splitlines() if line.startswith("| encoder"))
    columns = header.strip("| ").split(" | ")[2:]
    sota = next(line for line in section.splitlines() if line.startswith("| SOTA"))
    cells = [f"{float(printed[('SOTA', c)]):.2f}\u2020" for c in columns[:-2]] + ["–", "–"]
    assert sota == "| " + " | ".join(["SOTA (supervised, no transfer) [published]", "–"] + cells) + " |"
    glove = next(line for line in section.splitlines() if line.startswith("| GloVe BoW"))
    source = {c: "GloVe BoW" if c in ("SICK-R", "STS-B") else "GloVe LogReg" for c in columns}
    cells = [f"{float(printed[(source[c], c)]):.2f}" for c in columns]
    assert glove == "| " + " | ".join(["GloVe BoW [published]", "–"] + cells) + " |"
    assert f"{ADASENT}; " in section and "Conneau and Kiela (2018), Table 3, Table 4" in section
    result = cli("report", path, "--baselines", "senteval", "--format", "csv", "--no-ci")
    assert result.exit_code == 0, result.stderr
    rows = [r for r in csv.DictReader(io.StringIO(result.stdout)) if r["table"] == "transfer-logreg"]
    sota = [r for r in rows if r["encoder"] == "SOTA (supervised, no transfer) [published]"]
    assert len(sota) == 12 and {r["dim"] for r in sota} == {""}
    assert all(r["differs"] == "yes" for r in sota if r["value"]) and sum(1 for r in sota if r["value"]) == 10
    glove = [r for r in rows if r["encoder"] == "GloVe BoW [published]"]
    assert len(glove) == 12 and all(r["value"] and r["differs"] == "" for r in glove)
