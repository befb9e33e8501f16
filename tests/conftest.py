"""Shared fixtures: SentEval's task data, the devbow reference encoder, and vectors-file builders.

Tests that need SentEval's task data read it from $EMBEVAL_TEST_DATA, else from the data folder
`embeval data fetch` fills ($EMBEVAL_DATA, else the per-user data folder). Without it they are
skipped with one reason; with EMBEVAL_REQUIRE_DATA=1 (set by CI) the run stops at once instead.
"""

import os
import shutil
import tarfile
from pathlib import Path

import devbow as devbow_module
import pytest
from click.testing import CliRunner

import embeval  # noqa: F401  (before any product: MKL's reproducible mode, embeval.threads.REPRODUCIBLE)

REPO = Path(__file__).resolve().parents[1]
REFERENCE = Path(__file__).resolve().parent / "reference"

# The tasks the tests score on SentEval's real data. Files the tests must not see even when the
# data folder holds them (the tests make their own small SNLI train, COCO and probing files).
TEST_TASKS = (
    "CR",
    "MR",
    "MPQA",
    "SUBJ",
    "SST2",
    "SST5",
    "TREC",
    "MRPC",
    "SICKEntailment",
    "SICKRelatedness",
    "STSBenchmark",
    "STS12",
    "STS13",
    "STS14",
    "STS15",
    "STS16",
)
HIDDEN = ("SNLI/s1.train", "SNLI/s2.train", "SNLI/labels.train", "COCO")
RAW_STSB = "raw/STSBenchmark"
STSB_ARCHIVE = ".downloads/Stsbenchmark.tar.gz"


def data_source():
    """The data folder the tests read: $EMBEVAL_TEST_DATA, else the one `embeval data fetch` fills."""
    if os.environ.get("EMBEVAL_TEST_DATA"):
        return Path(os.environ["EMBEVAL_TEST_DATA"])
    from embeval.tasks.files import resolve_data_dir

    return resolve_data_dir()


def data_required():
    return os.environ.get("EMBEVAL_REQUIRE_DATA") == "1"


def missing_test_tasks(root):
    from embeval.tasks.registry import TASKS

    return [name for name in TEST_TASKS if TASKS[name].missing_files(root)]


SOURCE = data_source()
MISSING = missing_test_tasks(SOURCE)
NO_DATA = (
    f"SentEval's task data is not in {SOURCE} ({len(MISSING)} of the {len(TEST_TASKS)} tasks the tests use "
    f"are missing, e.g. {MISSING[0] if MISSING else ''}): run `embeval data fetch`, or set EMBEVAL_TEST_DATA "
    f"to a data folder it made"
)


def pytest_configure(config):
    if MISSING and data_required():
        raise pytest.UsageError(f"{NO_DATA} (EMBEVAL_REQUIRE_DATA=1)")
    share_the_cores(config)


def share_the_cores(config):
    """In pytest-xdist's controller, before it starts its test processes: each of them, and every
    process a test starts, gets the cores divided among the test processes as its threads (one each
    for `-n 2` on 2 cores), unless the variable is set. Two test processes of two threads each on two
    cores spent a fifth of the suite's time on each other's threads (docs/testing.md)."""
    workers = getattr(config.option, "numprocesses", None)
    if not workers or hasattr(config, "workerinput"):
        return  # one process (-n 0), or a test process: it inherits the controller's variables
    from embeval.threads import THREAD_VARIABLES, affinity_cpus

    count = max(1, affinity_cpus() // workers) if isinstance(workers, int) else 1
    for name in THREAD_VARIABLES + ("OPENBLAS_NUM_THREADS",):  # OpenMP, MKL, and numpy's OpenBLAS
        os.environ.setdefault(name, str(count))


# The tests that take more than a few seconds on a 2-core CPU (python -m pytest --durations=0), by
# file, and the fixtures that take that long (every test using one is slow: the fixture's cost falls
# on whichever of them runs first). `pytest -m "not slow"` leaves them out (docs/testing.md).
SLOW_FIXTURES = {
    "*": {"devbow_vectors"},
    "test_new_kind.py": {
        "test_a_kind_added_in_one_module_goes_through_every_command",
    },
    "test_own_tasks.py": {
        "test_sst2_as_a_split_classification_task_file",
        "test_trec_as_a_kfold_classification_task_file",
    },
    "test_predictions.py": {"runs"},
    "test_rank.py": {"toy_runs"},
    "test_probing.py": {"probing_run"},
    "test_reproducibility.py": {"prototype_runs"},
}
SLOW = {
    "test_baseline.py": {
        "test_baseline_scores_like_a_bow_vectors_file",
    },
    "test_classifiers_option.py": {
        "test_both_classifiers_equal_runs_with_each_alone",
    },
    "test_classify.py": {
        "test_lbfgs_against_sklearn_on_the_same_folds",
        "test_lbfgs_parity_with_converged_sklearn",
        "test_senteval_solver_parity_with_pytorch_path",
    },
    "test_data_fetch.py": {
        "test_fetch_over_http_builds_sentevals_layout_file_for_file",
    },
    "test_data_tokenizers.py": {
        "test_en_profile_is_sentevals_sts12_to_16_tokenization",
        "test_raw_sts_benchmark_tokenizes_to_sentevals_files",
        "test_sts_benchmark_steps_reproduce_sentevals_files_byte_for_byte",
    },
    "test_exporter_roles.py": {
        "test_minilm_exporters_role_lists_and_prompts",
        "test_sentence_transformers_named_prompts",
    },
    "test_declared_results.py": {
        "test_report_compare_and_export_mteb_need_neither_the_task_file_nor_the_data",
        "test_a_task_of_an_unknown_kind_is_named_in_one_warning",
    },
    "test_exporters.py": {
        "test_minilm_reimplementation_agrees_with_pytorch",
        "test_minilm_torch_exporter",
        "test_union_export_scores_the_same_as_per_task",
    },
    "test_fuzz.py": {
        "test_fuzz_vectors_files",
    },
    "test_geometry.py": {
        "test_stsb_geometry_in_the_results",
    },
    "test_mteb_cache_integrity.py": {
        "test_sigterm_while_the_cache_is_written_leaves_no_temporary_folder",
    },
    "test_mteb_kinds.py": {
        "test_a_near_chance_v_measure_and_its_interval_in_the_html_report",
    },
    "test_normalize.py": {
        "test_test_items_never_reach_the_statistics",
        "test_tune_keeps_the_best_dev_figure_and_equals_a_run_with_that_method",
    },
    "test_predictions.py": {
        "test_coco_ranks_reproduce_recalls",
        "test_compare_two_encoders",
        "test_compare_two_identical_runs_finds_no_difference",
        "test_predictions_reproduce_every_reported_figure",
        "test_resume_reuses_saved_predictions",
    },
    "test_probing.py": {
        "test_lbfgs_probing_logreg",
        "test_learnable_labels_near_100_with_both_classifiers",
    },
    "test_quickstart.py": {
        "test_bow_quickstart_end_to_end_and_reuse",
        "test_installed_wheel_ships_the_exporters",
        "test_minilm_quickstart",
        "test_quickstart_fetches_absent_data_into_the_user_folder",
        "test_quickstart_reembeds_when_the_export_changes",
    },
    "test_relatedness.py": {
        "test_devbow_matches_senteval",
        "test_evaluator_equals_senteval_written_out",
        "test_vectors_that_encode_the_score_give_pearson_near_one",
    },
    "test_reliability.py": {
        "test_absent_task_is_skipped_by_default_and_refused_with_strict",
        "test_bad_input_found_by_an_evaluator_mid_run",
        "test_disk_full_later_keeps_the_finished_tasks",
        "test_disk_full_on_the_final_write",
        "test_disk_full_on_the_first_write",
        "test_union_nan_outside_the_requested_rows_is_allowed",
        "test_union_tasks_differ_from_the_request",
    },
    "test_report.py": {
        "test_plots",
    },
    "test_reproducibility.py": {
        "test_cpu_runs_are_byte_identical_apart_from_timing",
        "test_lbfgs_runs_are_byte_identical_apart_from_timing",
    },
    "test_resume.py": {
        "test_interrupted_run_resumes_to_identical_results",
        "test_library_interrupt_names_the_saved_tasks",
        "test_resume_keeps_only_the_requested_tasks_and_says_so",
        "test_resume_recomputes_exactly_what_changed",
    },
    "test_caption_ranking.py": {
        "test_learnable_captions_are_retrieved",
        "test_unrelated_captions_score_at_chance",
    },
    "test_stats.py": {
        "test_false_positive_rate_of_two_equally_accurate_classifiers",
        "test_false_positive_rate_of_two_equally_good_sts_encoders",
    },
    "test_sts.py": {
        "test_cosine_sts_parity_with_senteval",
        "test_sts_benchmark_and_sick_cosine_on_test",
    },
    "test_vectors.py": {
        "test_round_trip_layouts",
        "test_union_mode_scores_equal_per_task",
    },
}


# pytest-xdist hands whole files to its two workers (`-n 2 --dist loadfile --no-loadscope-reorder` in
# pyproject.toml), in the order of the collection: the files that take longest go first, so that the
# workers finish together (python bench/suite.py: CPU seconds per test), the ones that hold a large
# process for a while (MEMORY_HEAVY) between others. A file not listed keeps its place after them.
LONG_FILES = (
    "test_docs.py",
    "test_exporters.py",
    "test_mteb_acceptance.py",
    "test_search.py",
    "test_api_exporter.py",
    "test_classify.py",
    "test_mteb_by_name.py",
    "test_quickstart.py",
    "test_vectors.py",
    "test_predictions.py",
    "test_exporter_roles.py",
    "test_sweep.py",
    "test_first_hour.py",
    "test_rank.py",
    "test_reliability.py",
    "test_sweep_ray.py",
    "test_mteb_kinds.py",
    "test_own_tasks.py",
    "test_docs_consistency.py",
    "test_startup.py",
)
# The files whose tests run a large process beside the test process (a MiniLM model in PyTorch, JAX
# or TensorFlow, an embedding server, a Ray cluster): one at a time across the workers, so that the
# run's memory stays that of one such process and two test processes.
MEMORY_HEAVY = {
    "test_api_exporter.py",
    "test_exporter_roles.py",
    "test_exporters.py",
    "test_quickstart.py",
    "test_sweep_ray.py",
}


def pytest_collection_modifyitems(config, items):
    """Mark the slow tests; a name in SLOW that its test file does not define stops the run. The
    LONG_FILES first."""
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file's order kept
    checked = set()
    for item in items:
        module = getattr(item, "module", None)
        listed = SLOW.get(item.path.name, set())
        if module is not None and item.path.name not in checked:
            checked.add(item.path.name)
            unknown = sorted(name for name in listed if not hasattr(module, name))
            if unknown:
                raise pytest.UsageError(
                    f"tests/conftest.py SLOW names tests that {item.path.name} does not define: {', '.join(unknown)}"
                )
        fixtures = SLOW_FIXTURES["*"] | SLOW_FIXTURES.get(item.path.name, set())
        if getattr(item, "originalname", None) in listed or fixtures & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def pytest_report_header(config):
    if MISSING:
        return f"SentEval task data: none; the tests that need it are skipped ({NO_DATA})"
    return f"SentEval task data: {SOURCE}"


def build_view(source, view):
    """A read-only view (symlinks) of the source's downstream files, less the HIDDEN ones, plus the
    untokenized STS Benchmark when the source has it (raw/STSBenchmark or the kept download)."""
    downstream = source / "downstream"
    for path in sorted(downstream.rglob("*")):
        rel = path.relative_to(downstream).as_posix()
        if path.is_file() and not any(rel == h or rel.startswith(h + "/") for h in HIDDEN):
            target = view / "downstream" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path.resolve())
    raw = view / RAW_STSB
    if (source / RAW_STSB).is_dir():
        raw.mkdir(parents=True)
        for path in sorted((source / RAW_STSB).iterdir()):
            if path.is_file():
                (raw / path.name).symlink_to(path.resolve())
    elif (source / STSB_ARCHIVE).is_file():
        raw.mkdir(parents=True)
        with tarfile.open(source / STSB_ARCHIVE) as archive:
            for member in archive.getmembers():
                if member.isfile() and member.name.startswith("stsbenchmark/") and member.name.count("/") == 1:
                    (raw / Path(member.name).name).write_bytes(archive.extractfile(member).read())
    return view


def built_once(tmp_path_factory, name, build):
    """A folder `build(folder)` fills once per test run. pytest-xdist's workers (the suite's `-n 2`)
    share it: the first that asks builds it in the run's common temporary folder while the others
    wait for it, under a lock; a build that failed is tried again by the next worker that asks."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        folder = tmp_path_factory.mktemp(name)
        build(folder)
        return folder
    from filelock import FileLock

    common = tmp_path_factory.getbasetemp().parent
    folder, done = common / name, common / f"{name}.done"
    with FileLock(common / f"{name}.lock"):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


@pytest.fixture(scope="module", autouse=True)
def one_memory_heavy_file_at_a_time(request, tmp_path_factory):
    """Under pytest-xdist, a MEMORY_HEAVY file's tests run while no other worker runs one."""
    if request.path.name not in MEMORY_HEAVY or "PYTEST_XDIST_WORKER" not in os.environ:
        yield
        return
    from filelock import FileLock

    with FileLock(tmp_path_factory.getbasetemp().parent / "memory-heavy.lock"):
        yield


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
    """SentEval's downstream data (read-only): the TEST_TASKS' files, as the tests expect them."""
    if MISSING:
        pytest.skip(NO_DATA)
    return build_view(SOURCE, tmp_path_factory.mktemp("senteval_data"))


@pytest.fixture(scope="session")
def raw_sts_benchmark(data_dir):
    """The untokenized, cased STS Benchmark csv files (the data STSBenchmark is built from)."""
    folder = data_dir / RAW_STSB
    if not folder.is_dir():
        reason = (
            f"the untokenized STS Benchmark is not in {SOURCE}: put its csv files in {RAW_STSB}/ there, or "
            f"fetch with `embeval data fetch --keep-downloads` (keeps {STSB_ARCHIVE})"
        )
        if data_required():
            pytest.fail(f"{reason} (EMBEVAL_REQUIRE_DATA=1)")
        pytest.skip(reason)
    return folder


@pytest.fixture(scope="session")
def reference_dir():
    """Recorded outputs of the original SentEval on devbow vectors (tests/reference/README.md)."""
    return REFERENCE


@pytest.fixture(scope="session")
def devbow():
    """The deterministic 128-d encoder behind the recorded SentEval outputs."""
    return devbow_module


@pytest.fixture
def cli():
    """Run the embeval command in-process: cli(*args) -> click Result (exit_code, stdout, stderr)."""
    from embeval.cli.main import cli as command

    def run(*args):
        return CliRunner().invoke(command, [str(a) for a in args], catch_exceptions=False)

    return run


@pytest.fixture(scope="session")
def devbow_vectors(tmp_path_factory, data_dir):
    """An export of every test task, and its devbow vectors file: (export dir, vectors path)."""
    from embeval.formats import sentences as export
    from embeval.formats.vectors import write
    from embeval.tasks.registry import TASKS

    def build(root):
        export.export([TASKS[n].load(data_dir) for n in TEST_TASKS], root / "sentences")
        write(root / "devbow.h5", root / "sentences", devbow_module.encode, batch_size=4096, progress=False)

    root = built_once(tmp_path_factory, "devbow", build)
    return root / "sentences", root / "devbow.h5"


@pytest.fixture(scope="session")
def minilm_sts16(tmp_path_factory, data_dir):
    """STS16 (every sentence, for its scores) and the edge cases (exporter_helpers.EDGE_SENTENCES, as
    a second task, STS12) embedded by the sentence-transformers exporter with all-MiniLM-L6-v2 (its
    own process, batches of 32, CPU), once for every test that compares with it:
    (export folder, vectors path)."""
    from exporter_helpers import EDGE_SENTENCES, MINILM_MODULES, need_modules, run_exporter, write_export

    from embeval.formats import sentences as export
    from embeval.tasks.registry import TASKS

    need_modules(*MINILM_MODULES)

    def build(root):
        sts16 = export.task_sentences(TASKS["STS16"].load(data_dir))
        folder = write_export(root / "sentences", {"STS16": sts16, "STS12": EDGE_SENTENCES})
        result = run_exporter(
            "sentence_transformers_export.py", "--export", folder, "--out", root / "torch.h5", "--batch-size", 32,
            "--device", "cpu",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        # Off a terminal (stderr is a pipe here) no loader's carriage-return progress bar garbles the log.
        assert "\r" not in result.stderr and "Loading weights" not in result.stderr, result.stderr

    root = built_once(tmp_path_factory, "minilm_sts16", build)
    return root / "sentences", root / "torch.h5"


@pytest.fixture(scope="session")
def minilm_roles(tmp_path_factory):
    """exporter_helpers' role export with the reference's lists beside it (combined_lists), embedded by
    the sentence-transformers exporter with all-MiniLM-L6-v2 and a prompt per role (PROMPT_ARGS, CPU),
    once for the role tests of that exporter and of the API exporter: (export folder, vectors path)."""
    from exporter_helpers import MINILM_MODULES, PROMPT_ARGS, combined_lists, need_modules, run_exporter

    from embeval.formats.sentences import export

    need_modules(*MINILM_MODULES)

    def build(root):
        export(combined_lists(), root / "combined")
        result = run_exporter(
            "sentence_transformers_export.py", "--export", root / "combined", "--out", root / "torch.h5", "--quiet",
            "--device", "cpu", *PROMPT_ARGS,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr

    root = built_once(tmp_path_factory, "minilm_roles", build)
    return root / "combined", root / "torch.h5"
