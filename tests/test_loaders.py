"""Loaders: sample counts, distinct-sentence counts, and each format's corner cases."""

import pickle
from pathlib import Path

import numpy as np
import pytest

from embeval.errors import DataFileError
from embeval.formats.sentences import task_sentences
from embeval.tasks.registry import TASKS
from embeval.tasks.samples import senteval_order

# Samples per split, as SentEval's README and paper list them.
SAMPLE_COUNTS = {
    "CR": {"all": 3775},
    "MR": {"all": 10662},
    "MPQA": {"all": 10606},
    "SUBJ": {"all": 10000},
    "SST2": {"train": 67349, "dev": 872, "test": 1821},
    "SST5": {"train": 8544, "dev": 1101, "test": 2210},
    "TREC": {"train": 5452, "test": 500},
    "MRPC": {"train": 4076, "test": 1725},
    "SICKEntailment": {"train": 4500, "dev": 500, "test": 4927},
    "SICKRelatedness": {"train": 4500, "dev": 500, "test": 4927},
    "STSBenchmark": {"train": 5749, "dev": 1500, "test": 1379},
    "STS12": {"MSRpar": 750, "MSRvid": 750, "SMTeuroparl": 459, "surprise.OnWN": 750, "surprise.SMTnews": 399},
    "STS13": {"FNWN": 189, "headlines": 750, "OnWN": 561},
    "STS14": {"deft-forum": 450, "deft-news": 300, "headlines": 750, "images": 750, "OnWN": 750, "tweet-news": 750},
    "STS15": {"answers-forums": 375, "answers-students": 750, "belief": 375, "headlines": 750, "images": 750},
    "STS16": {"answer-answer": 254, "headlines": 249, "plagiarism": 230, "postediting": 244, "question-question": 209},
}

# Distinct sentences among the sentences SentEval's loaders produce (the issue quotes SICK-E and MPQA).
DISTINCT = {
    "CR": 3766,
    "MR": 10662,
    "MPQA": 8241,
    "SUBJ": 10000,
    "SST2": 69669,
    "SST5": 11841,
    "TREC": 5870,
    "MRPC": 10944,
    "SICKEntailment": 6090,
    "SICKRelatedness": 6090,
    "STSBenchmark": 15437,
    "STS12": 4946,
    "STS13": 2638,
    "STS14": 6351,
    "STS15": 5170,
    "STS16": 1867,
}


@pytest.mark.parametrize("name", sorted(SAMPLE_COUNTS))
def test_sample_counts(data_dir, name):
    data = TASKS[name].load(data_dir)
    assert {k: len(s) for k, s in data.splits.items()} == SAMPLE_COUNTS[name]


def _independent_sentences(data_dir, name):
    """SentEval's loaders re-stated in the plainest terms, as an independent count of its sentences."""
    ds = Path(data_dir) / "downstream"

    def lines(path, enc):
        return open(path, encoding=enc).read().splitlines()

    def words(text):
        return " ".join(text.split())

    binary = {
        "CR": ("CR", "custrev.pos", "custrev.neg"),
        "MR": ("MR", "rt-polarity.pos", "rt-polarity.neg"),
        "MPQA": ("MPQA", "mpqa.pos", "mpqa.neg"),
        "SUBJ": ("SUBJ", "subj.objective", "subj.subjective"),
    }
    if name in binary:
        folder, *files = binary[name]
        return [words(x) for f in files for x in lines(ds / folder / f, "latin-1")]
    if name in ("SST2", "SST5"):
        folder = "binary" if name == "SST2" else "fine"
        out = []
        for split in ("train", "dev", "test"):
            for line in open(ds / "SST" / folder / f"sentiment-{split}", encoding="utf-8"):
                out.append(words(line.strip().split("\t")[0] if name == "SST2" else line.strip().split(" ", 1)[1]))
        return out
    if name == "TREC":
        return [
            words(line.strip().split(":", 1)[1].split(" ", 1)[1])
            for f in ("train_5500.label", "TREC_10.label")
            for line in open(ds / "TREC" / f, encoding="latin-1")
        ]
    if name == "MRPC":
        rows = [
            line.strip().split("\t")
            for f in ("msr_paraphrase_train.txt", "msr_paraphrase_test.txt")
            for line in list(open(ds / "MRPC" / f, encoding="utf-8"))[1:]
        ]
        return [words(r[3]) for r in rows] + [words(r[4]) for r in rows]
    if name.startswith("SICK"):
        rows = [
            line.strip().split("\t")
            for f in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt")
            for line in list(open(ds / "SICK" / f, encoding="utf-8"))[1:]
        ]
        return [words(r[i]) for r in rows for i in (1, 2)]
    if name == "STSBenchmark":
        rows = [
            line.strip().split("\t")
            for s in ("train", "dev", "test")
            for line in open(ds / "STS" / "STSBenchmark" / f"sts-{s}.csv", encoding="utf-8")
        ]
        return [words(r[i]) for r in rows for i in (5, 6)]
    task = TASKS[name]
    out = []
    paths = task.paths(data_dir)
    for subset in dict.fromkeys(key.rsplit(".", 1)[0] for key, _ in task.files):
        pairs = lines(paths[f"{subset}.input"], "utf-8")
        gold = lines(paths[f"{subset}.gs"], "utf-8")
        out += [words(p.split("\t")[i]) for p, g in zip(pairs, gold) if g != "" for i in (0, 1)]
    return out


@pytest.mark.parametrize("name", sorted(DISTINCT))
def test_distinct_sentence_counts(data_dir, name):
    exported = task_sentences(TASKS[name].load(data_dir))
    independent = _independent_sentences(data_dir, name)
    assert len(exported) == DISTINCT[name] == len(set(independent))
    assert set(exported) == set(independent)


def test_sick_slots_and_empty_sentences(data_dir):
    sick = TASKS["SICKEntailment"].load(data_dir)
    assert len(sick.sentences()) == 19854
    assert len(TASKS["MPQA"].load(data_dir).sentences()) == 10606
    cr = TASKS["CR"].load(data_dir).splits["all"]
    assert sum(1 for s in cr.a if s == "") == 4
    mpqa = TASKS["MPQA"].load(data_dir).splits["all"]
    assert sum(1 for s in mpqa.a if s == "") == 3
    assert "" in task_sentences(TASKS["CR"].load(data_dir))


def test_labels_and_targets(data_dir):
    mr = TASKS["MR"].load(data_dir).splits["all"]
    assert mr.y[:5331].tolist() == [1] * 5331 and mr.y[5331:].tolist() == [0] * 5331
    subj = TASKS["SUBJ"].load(data_dir).splits["all"]
    assert subj.y[0] == 1 and subj.y[-1] == 0
    trec = TASKS["TREC"].load(data_dir).splits["train"]
    assert trec.a[0] == "How did serfdom develop in and then leave Russia ?" and trec.y[0] == 1
    assert sorted(set(trec.y.tolist())) == [0, 1, 2, 3, 4, 5]
    sst5 = TASKS["SST5"].load(data_dir).splits["train"]
    assert sst5.y[0] == 4 and sst5.a[0].startswith("a stirring , funny")
    mrpc = TASKS["MRPC"].load(data_dir).splits["train"]
    assert mrpc.y[0] == 1 and mrpc.a[0].startswith("Amrozi accused") and len(mrpc) == 4076
    sickr = TASKS["SICKRelatedness"].load(data_dir).splits["train"]
    assert sickr.y[0] == pytest.approx(4.5)
    sicke = TASKS["SICKEntailment"].load(data_dir).splits["train"]
    assert sicke.y[0] == 1  # NEUTRAL
    stsb = TASKS["STSBenchmark"].load(data_dir).splits["train"]
    assert stsb.y[0] == 5.0 and stsb.a[0] == "a plane is taking off ." and stsb.b[0] == "an air plane is taking off ."


def test_sick_crlf_test_file_has_no_carriage_returns(data_dir):
    test = TASKS["SICKEntailment"].load(data_dir).splits["test"]
    assert not any("\r" in s for s in test.a + test.b)
    assert set(test.y.tolist()) == {0, 1, 2}


def test_sts_blank_gold_lines_dropped(data_dir):
    sts16 = TASKS["STS16"].load(data_dir)
    assert len(sts16.splits["answer-answer"]) == 1572 - 1318


def write(path, text, encoding="utf-8"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode(encoding))
    return path


def sts_task_dir(tmp_path, subsets_text):
    folder = tmp_path / "downstream/STS/STS13-en-test"
    for subset, (inp, gs) in subsets_text.items():
        write(folder / f"STS.input.{subset}.txt", inp)
        write(folder / f"STS.gs.{subset}.txt", gs)
    return tmp_path


def test_sts_blank_and_whitespace_gold_dropped_synthetic(tmp_path):
    pairs = "a b\tc d\ne f\tg h\ni j\tk l\n"
    gold = {"FNWN": (pairs, "1.0\n\n2.5\n"), "headlines": (pairs, "0\n 	\n5\n"), "OnWN": (pairs, "1\n2\n3\n")}
    data = TASKS["STS13"].load(sts_task_dir(tmp_path, gold))
    assert data.splits["FNWN"].a == ["a b", "i j"] and data.splits["FNWN"].y.tolist() == [1.0, 2.5]
    assert data.splits["headlines"].y.tolist() == [0.0, 5.0]
    assert len(data.splits["OnWN"]) == 3


def test_sts_gold_count_mismatch_is_an_error(tmp_path):
    gold = {"FNWN": ("a\tb\nc\td\n", "1\n"), "headlines": ("a\tb\n", "1\n"), "OnWN": ("a\tb\n", "1\n")}
    with pytest.raises(DataFileError, match="1 gold lines for 2 sentence pairs"):
        TASKS["STS13"].load(sts_task_dir(tmp_path, gold))


def test_sts_line_without_tab_names_file_and_line(tmp_path):
    gold = {"FNWN": ("a\tb\nno tab here\n", "1\n2\n"), "headlines": ("a\tb\n", "1\n"), "OnWN": ("a\tb\n", "1\n")}
    with pytest.raises(DataFileError) as err:
        TASKS["STS13"].load(sts_task_dir(tmp_path, gold))
    assert "STS.input.FNWN.txt:2" in str(err.value) and "STS13" in str(err.value)


def test_mrpc_bom_header_skipped(tmp_path):
    header = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    write(tmp_path / "downstream/MRPC/msr_paraphrase_train.txt", header + "1\t1\t2\tA  b\tc d\n0\t3\t4\te\tf\n")
    write(tmp_path / "downstream/MRPC/msr_paraphrase_test.txt", header + "1\t5\t6\tg\th\n")
    data = TASKS["MRPC"].load(tmp_path)
    assert data.splits["train"].a == ["A b", "e"] and data.splits["train"].y.tolist() == [1, 0]
    assert data.splits["test"].b == ["h"]


def test_binary_splitlines_breaks_on_unicode_line_separators(tmp_path):
    write(tmp_path / "downstream/MR/rt-polarity.pos", "one\x0btwo\x1cthree\x85four\n", "latin-1")
    write(tmp_path / "downstream/MR/rt-polarity.neg", "\nfive  six\n", "latin-1")
    data = TASKS["MR"].load(tmp_path).splits["all"]
    assert data.a == ["one", "two", "three", "four", "", "five six"]
    assert data.y.tolist() == [1, 1, 1, 1, 0, 0]


def test_sst_iterates_lines_not_splitlines(tmp_path):
    for split in ("train", "dev", "test"):
        write(tmp_path / f"downstream/SST/binary/sentiment-{split}", "a\x0bb c\t1\nd e\t0\n")
    data = TASKS["SST2"].load(tmp_path).splits["train"]
    assert data.a == ["a b c", "d e"] and data.y.tolist() == [1, 0]


def test_sst5_label_first_and_malformed_line(tmp_path):
    for split in ("train", "dev", "test"):
        write(tmp_path / f"downstream/SST/fine/sentiment-{split}", "4 great  film\n0 bad\n")
    data = TASKS["SST5"].load(tmp_path).splits["dev"]
    assert data.a == ["great film", "bad"] and data.y.tolist() == [4, 0]
    write(tmp_path / "downstream/SST/fine/sentiment-test", "4 fine\n9 out of range\n")
    with pytest.raises(DataFileError) as err:
        TASKS["SST5"].load(tmp_path)
    assert "sentiment-test:2" in str(err.value) and "outside 0..4" in str(err.value)


def test_trec_coarse_labels_and_unknown_label(tmp_path):
    write(tmp_path / "downstream/TREC/train_5500.label", "NUM:date When was it ?\nHUM:ind Who  is he ?\n", "latin-1")
    write(tmp_path / "downstream/TREC/TREC_10.label", "LOC:city Where ?\n", "latin-1")
    data = TASKS["TREC"].load(tmp_path)
    assert data.splits["train"].a == ["When was it ?", "Who is he ?"]
    assert data.splits["train"].y.tolist() == [5, 3] and data.splits["test"].y.tolist() == [4]
    write(tmp_path / "downstream/TREC/TREC_10.label", "LOC:city Where ?\nFOO:bar What ?\n", "latin-1")
    with pytest.raises(DataFileError, match="TREC_10.label:2.*unknown coarse label 'FOO'"):
        TASKS["TREC"].load(tmp_path)


def snli_dir(tmp_path, splits=("train", "dev", "test")):
    for split in splits:
        write(tmp_path / f"downstream/SNLI/s1.{split}", "A man sleeps .\nA dog runs\xa0fast .\nA cat .\n", "latin-1")
        write(tmp_path / f"downstream/SNLI/s2.{split}", "He rests .\nIt moves .\nAn animal .\n", "latin-1")
        write(tmp_path / f"downstream/SNLI/labels.{split}", "neutral\nentailment\ncontradiction\n")
    return tmp_path


def test_snli_labels_byte_tokens_and_sort_order(tmp_path):
    data = TASKS["SNLI"].load(snli_dir(tmp_path)).splits["dev"]
    assert data.y.tolist() == [1, 0, 2]
    # SentEval splits the UTF-8 bytes on ASCII whitespace: a no-break space stays inside its token.
    assert data.a[1] == "A dog runs\xa0fast ."
    # (tokens of s2, tokens of s1, raw label): all s2 have 3 tokens except 'He rests .';
    # ties order contradiction < entailment < neutral by the raw string.
    order = senteval_order(data, "snli").tolist()
    assert order == [2, 1, 0]


def test_snli_missing_train_split_names_the_file(tmp_path):
    with pytest.raises(DataFileError) as err:
        TASKS["SNLI"].load(snli_dir(tmp_path, splits=("dev", "test")))
    assert "s1.train" in str(err.value) and "SNLI" in str(err.value) and "embeval data fetch" in str(err.value)


def test_snli_unknown_label_and_count_mismatch(tmp_path):
    snli_dir(tmp_path)
    write(tmp_path / "downstream/SNLI/labels.test", "neutral\nmaybe\ncontradiction\n")
    with pytest.raises(DataFileError, match="labels.test:2.*unknown label 'maybe'"):
        TASKS["SNLI"].load(tmp_path)
    write(tmp_path / "downstream/SNLI/labels.test", "neutral\n")
    with pytest.raises(DataFileError, match="differ in count"):
        TASKS["SNLI"].load(tmp_path)


def probing_file(tmp_path, text):
    write(tmp_path / "probing/tree_depth.txt", text)
    return tmp_path


def test_probing_labels_numbered_in_string_order(tmp_path):
    text = "tr\t5\tx\ta b c\ntr\t10\tx\ta b\ntr\t12\tx\ta\nva\t5\tx\tq\nte\t10\tx\tr  s\n"
    data = TASKS["Depth"].load(probing_file(tmp_path, text))
    assert data.classes == ["10", "12", "5"]
    assert data.splits["train"].y.tolist() == [2, 0, 1]
    assert data.splits["test"].a == ["r s"]
    assert senteval_order(data.splits["train"], "single").tolist() == [2, 1, 0]


def test_probing_malformed_line_and_unseen_label(tmp_path):
    with pytest.raises(DataFileError) as err:
        TASKS["Depth"].load(probing_file(tmp_path, "tr\t5\tx\ta\nxx\t5\tb\n"))
    assert "tree_depth.txt:2" in str(err.value)
    with pytest.raises(DataFileError, match="tree_depth.txt:2.*does not occur in the train split"):
        TASKS["Depth"].load(probing_file(tmp_path, "tr\t5\tx\ta\nte\t7\tx\tb\n"))


def coco_dir(tmp_path, payload):
    folder = tmp_path / "downstream/COCO"
    folder.mkdir(parents=True, exist_ok=True)
    for split in ("train", "valid", "test"):
        (folder / f"{split}.pkl").write_bytes(payload)
    return tmp_path


def coco_payload(n_images=2, dim=4):
    captions = {i: {"cleaned_caption": f"caption number {i}"} for i in range(n_images * 6)}
    links = [list(range(i * 6, i * 6 + 6)) for i in range(n_images)]
    features = np.arange(n_images * dim, dtype=np.float32).reshape(n_images, dim)
    return pickle.dumps({"features": features, "image_to_caption_ids": links, "captions": captions}, protocol=2)


def test_coco_plain_pickle_layout(tmp_path):
    data = TASKS["ImageCaptionRetrieval"].load(coco_dir(tmp_path, coco_payload()))
    train = data.splits["train"]
    assert len(train) == 10 and train.a[0] == "caption number 0 ." and train.a[5] == "caption number 6 ."
    assert train.y.tolist() == [0] * 5 + [1] * 5 and train.images.shape == (2, 4)


class _Sneaky:
    def __reduce__(self):
        import os

        return (os.system, ("echo should-not-run",))


def test_coco_pickle_with_code_is_refused(tmp_path):
    payload = pickle.dumps({"features": _Sneaky()}, protocol=2)
    with pytest.raises(DataFileError) as err:
        TASKS["ImageCaptionRetrieval"].load(coco_dir(tmp_path, payload))
    assert "refused to build" in str(err.value) and "system" in str(err.value)


def test_missing_data_folder_and_file(tmp_path):
    with pytest.raises(DataFileError, match="data folder not found.*embeval data fetch"):
        TASKS["MR"].load(tmp_path / "nowhere")
    with pytest.raises(DataFileError) as err:
        TASKS["MR"].load(tmp_path)
    assert "rt-polarity.pos" in str(err.value) and "MR" in str(err.value)


def test_senteval_order_is_stable_on_token_count_then_label():
    from embeval.tasks.samples import Split

    split = Split("all", ["a b", "c", "d e", "f", ""], np.array([1, 1, 0, 0, 1]))
    assert senteval_order(split, "single").tolist() == [4, 3, 1, 2, 0]
    pair = Split("x", ["a", "a", "a b"], np.array([2.0, 1.0, 0.0]), b=["x y", "x y", "z"])
    assert senteval_order(pair, "pair").tolist() == [1, 0, 2]


def test_data_dir_resolution(monkeypatch, tmp_path):
    from embeval.tasks.files import default_data_dir, resolve_data_dir

    monkeypatch.setenv("EMBEVAL_DATA", str(tmp_path / "env"))
    assert resolve_data_dir(str(tmp_path / "opt")) == tmp_path / "opt"
    assert resolve_data_dir(None) == tmp_path / "env"
    monkeypatch.delenv("EMBEVAL_DATA")
    assert resolve_data_dir(None) == default_data_dir()
