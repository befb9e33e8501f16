"""Published baselines: every figure has a source and says how it was computed; the report shows them as
extra rows, marks each figure computed differently from its column, and never mixes protocols silently."""

import json
from pathlib import Path

import pytest
from reliability_helpers import refused

from embeval.errors import EmbevalError
from embeval.reports import baselines
from embeval.reports import tables as report

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "example" / "results-minilm.json"
STS = ("STS12", "STS13", "STS14", "STS15", "STS16")
CLASSIFICATION = ("MR", "CR", "SUBJ", "MPQA", "SST2", "SST5", "TREC", "MRPC", "SICKEntailment", "SNLI")
# The one printed average that its row's figures do not give: Sentence-BERT's Table 1 prints 74.89 for
# SBERT-NLI-base, whose seven figures average 74.86 (SimCSE's Table B.2 repeats both).
PRINTED_AVERAGE_DIFFERS = {("sbert", "Table 1", "sbert-nli-base"): 0.03}


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
        assert f.protocol in ("cosine", "regressor", "classifier"), where
        if f.task in STS:
            assert f.protocol == "cosine" and f.metric in ("pearson", "spearman"), where
            assert f.aggregation in ("mean", "wmean", "pooled"), where
        elif f.task in ("STSBenchmark", "SICKRelatedness"):
            assert f.protocol in ("cosine", "regressor") and f.metric in ("pearson", "spearman"), where
            assert f.split == "test", where
        else:
            assert f.task in CLASSIFICATION, where
            assert f.protocol == "classifier" and f.classifier in ("logreg", "mlp"), where
            assert f.metric in ("accuracy", "f1"), where
        assert 0 < f.value <= 100, where
    for name, entry in names.items():
        assert entry["label"] and isinstance(entry["dim"], int)
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
    with pytest.raises(EmbevalError, match="known: simcse-unsup-bert-base, .*infersent1"):
        baselines.resolve("simcse-bert")
    refused(cli("report", EXAMPLE, "--baselines", "glove"), "--baselines", "unknown baseline 'glove'", "glove-avg")
    for fmt, mark in (("markdown", "72.23\u2020"), ("latex", "72.23$^\\dagger$"), ("csv", ",yes\n")):
        result = cli("report", EXAMPLE, "--baselines", "simcse-unsup-bert-base", "--format", fmt, "--no-ci")
        assert result.exit_code == 0, result.stderr
        assert "unsup. SimCSE-BERT-base [published]" in result.stdout and mark in result.stdout
