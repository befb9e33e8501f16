"""The docs say what the code does, by construction (README.md and docs/*.md):

- every ```json example is a real document's shape: preceded by `<!-- json: DOCUMENT[, PATH] -->`, it
  is matched against that document as a run writes it now (see `match`);
- every file or folder of the repository the docs name (`bench/x.py`, `tests/...`, `docs/example`,
  `pyproject.toml`...) exists, every link to a file exists and every `#anchor` is a heading there;
- every `python bench/SCRIPT.py --option` names a script and options its --help lists;
- the counts the docs state about the task registry are the registry's.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_docs import ALL_BLOCKS, DOCS, REPO, make_sandbox

# JSON examples.
#
# An example is JSON with placeholders: `…` (or "…", "...") for any value, `{…}` any object, `[...]` any
# array, and a member `…` in an object ("and more"). An object without that member lists every key the
# real object has (a closed object); with it, some of them. Objects keyed by names (tasks, subsets,
# roles, benchmarks, MTEB types: NAMED below) are matched entry by entry against any entry of the real
# object. Numbers match numbers, strings strings; the constant strings of a format (CONSTANT) must be equal.
# A fragment (`"key": value, ...`) is read as an object with `…`.

JSON_MARKER = re.compile(r"<!--\s*json:\s*([\w-]+)\s*(?:,\s*([\w.*]+))?\s*-->")
ANY, MORE = "\u2026any", "\u2026more"
NAMED = {"tasks", "benchmarks", "types"}  # keys whose object is keyed by names (of tasks, benchmarks, MTEB types)
CONSTANT = {"format", "format_version", "embeval"}


def parse_example(text):
    """The example as Python objects, placeholders as ANY and MORE members (MORE: True)."""
    body = text.strip()
    fragment = body.startswith('"')
    if fragment:
        body = "{" + body + ", \u2026}"
    body = re.sub(r"\[\s*(\.\.\.|\u2026)\s*\]", f'"{ANY}"', body)
    body = re.sub(r"\{\s*(\.\.\.|\u2026)\s*\}", '{"' + MORE + '": true}', body)
    body = re.sub(r'"(\.\.\.|\u2026)"\s*:\s*("[^"]*"|[-\d.]+|\{\}|\[\])', f'"{MORE}": true', body)
    body = re.sub(r'"(\.\.\.|\u2026)"', f'"{ANY}"', body)
    body = re.sub(r"(?<=[,{])\s*(\.\.\.|\u2026)\s*(?=[}])", f'"{MORE}": true', body)
    body = re.sub(r"(?<=[\[,:])\s*(\.\.\.|\u2026)\s*(?=[,\]}])", f'"{ANY}"', body)
    return json.loads(body)


def match(example, real, path="$", named=False):
    """Problems (a list of strings) of `example` against `real`."""
    if example == ANY:
        return []
    if isinstance(example, dict):
        if not isinstance(real, dict):
            return [f"{path}: an object in the docs, {type(real).__name__} in a run"]
        members = {k: v for k, v in example.items() if k != MORE}
        if named:  # each entry of the docs against some entry of the run
            problems = []
            for key, value in members.items():
                tries = [match(value, real[key], f"{path}.{key}")] if key in real else []
                tries += [match(value, one, f"{path}.{key}") for name, one in real.items() if name != key]
                if tries and not min(tries, key=len):
                    continue
                problems += min(tries, key=len) if tries else [f"{path}: no entry like {key!r} in a run"]
            return problems
        problems = [f"{path}: `{key}` is not written by a run" for key in members if key not in real]
        if MORE not in example:
            problems += [
                f"{path}: a run also writes `{key}` (list it, or end the object with …)"
                for key in real
                if key not in members
            ]
        for key, value in members.items():
            if key in real:
                problems += match(value, real[key], f"{path}.{key}", named=key in NAMED)
                if key in CONSTANT and value != ANY and value != real[key]:
                    problems.append(f"{path}.{key}: {value!r} in the docs, {real[key]!r} in a run")
        return problems
    if isinstance(example, list):
        if not isinstance(real, list):
            return [f"{path}: an array in the docs, {type(real).__name__} in a run"]
        if not real:
            return []
        return [p for one in example if one != ANY for p in match(one, real[0], f"{path}[]")]
    kinds = ((bool,), (int, float), (str,), (type(None),))
    same = any(isinstance(example, k) and isinstance(real, k) for k in kinds)
    if isinstance(example, bool) != isinstance(real, bool):
        same = False
    return [] if same else [f"{path}: {example!r} in the docs, {real!r} in a run"]


def test_the_example_reader_and_matcher():
    example = parse_example('{"a": 1, "b": {…}, "c": [...], "d": "…", "e": {"x": 1, …}}')
    assert match(example, {"a": 2.5, "b": {"q": 1}, "c": [1], "d": None, "e": {"x": 0, "y": 1}}) == []
    assert match(example, {"a": 1, "b": {}, "c": [], "d": 1, "e": {"x": 1}, "f": 0}) == [
        "$: a run also writes `f` (list it, or end the object with …)"
    ]
    assert match(example, {"a": "1", "b": {}, "c": [], "d": 1, "e": {"y": 1}}) == [
        "$.a: 1 in the docs, '1' in a run",
        "$.e: `x` is not written by a run",
    ]
    fragment = parse_example('"tasks": {"MR": {"kind": "classification", "results": {…}}}')
    run = {"tasks": {"CR": {"kind": "classification", "results": {}}}, "other": 1}
    assert match(fragment, run) == []
    assert match(fragment, {"tasks": {"CR": {"kind": "classification"}}}) != []
    assert match(parse_example('{"format": "embeval-results"}'), {"format": "x"}) != []


JSON_BLOCKS = [block for block in ALL_BLOCKS if block.lang == "json"]


def json_markers():
    """{block.where: (document, path)} of every json block's marker (None: no marker)."""
    found = {}
    for path in DOCS:
        lines = path.read_text(encoding="utf-8").splitlines()
        for block in JSON_BLOCKS:
            if Path(block.path) != path:
                continue
            before = "\n".join(lines[max(0, block.line - 4) : block.line - 1])
            marks = list(JSON_MARKER.finditer(before))
            found[block.where] = (marks[-1].group(1), marks[-1].group(2)) if marks else None
    return found


def test_every_json_example_says_what_it_shows():
    markers = json_markers()
    assert len(markers) >= 5
    assert [where for where, mark in markers.items() if mark is None] == []
    assert {mark[0] for mark in markers.values()} <= set(DOCUMENTS)


RELATEDNESS_TOML = """name = "Relatedness"
kind = "relatedness"
[files]
train = "rel/train.tsv"
dev = "rel/dev.tsv"
test = "rel/test.tsv"
"""
RETRIEVAL_TOML = """name = "NFCorpus"
kind = "retrieval"
[files]
corpus = "ret/corpus.jsonl"
queries = "ret/queries.jsonl"
qrels = "ret/qrels/test.tsv"
[mteb]
name = "NFCorpus"
"""


def write_relatedness(folder):
    """A small relatedness task (scored pairs, train/dev/test) and its task file in `folder`."""
    import random

    rng = random.Random(0)
    words = ["cat", "dog", "bird", "fish", "tree", "rock", "lake", "hill", "road", "city", "farm", "ship"]
    (folder / "rel").mkdir()
    for split, n in (("train", 60), ("dev", 20), ("test", 20)):
        rows = ["sentence1\tsentence2\tscore"]
        for _ in range(n):
            a, b = rng.sample(words, 2)
            rows.append(f"a {a} and a {b}\tthe {a} by the {rng.choice(words)}\t{rng.uniform(0, 5):.2f}")
        (folder / "rel" / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (folder / "relatedness.toml").write_text(RELATEDNESS_TOML, encoding="utf-8")
    return folder / "relatedness.toml"


@pytest.fixture(scope="module")
def documents(tmp_path_factory, data_dir):
    """Each document the examples show, as a run writes it now: a results file of STS16, a 60-sentence
    MR, an MTEB retrieval task and a relatedness task (its benchmarks section included: the run has MTEB
    tasks of two types), and the manifest of an export (STS12, and the retrieval task's role lists)."""
    import devbow
    from test_docs import write_retrieval_task

    import embeval
    from embeval.formats.vectors import write

    root = make_sandbox(tmp_path_factory.mktemp("documents"), data_dir, "plain")
    write_retrieval_task(root)
    (root / "retrieval.toml").write_text(RETRIEVAL_TOML, encoding="utf-8")
    task_files = [root / "retrieval.toml", write_relatedness(root)]
    tasks = ["STS16", "MR", "NFCorpus", "Relatedness"]
    embeval.export_sentences(root / "data", root / "run", tasks=tasks, task_files=task_files)
    write(root / "run.h5", root / "run", devbow.encode, progress=False)
    from embeval.run.score import score
    from embeval.tasks.registry import registry

    score(
        root / "run.h5",
        root / "data",
        tasks=tasks,
        out=root / "results.json",
        registry=registry(task_files),
        progress=False,
    )
    embeval.export_sentences(data_dir, root / "export", tasks=["STS12", "NFCorpus"], task_files=task_files[:1])
    return {
        "results": json.loads((root / "results.json").read_text()),
        "manifest": json.loads((root / "export" / "manifest.json").read_text()),
    }


DOCUMENTS = ("results", "manifest")


@pytest.mark.slow  # scores four small tasks (about 15 s on 2 cores)
@pytest.mark.parametrize("block", JSON_BLOCKS, ids=[block.where for block in JSON_BLOCKS])
def test_json_example_is_what_a_run_writes(block, documents):
    mark = json_markers()[block.where]
    assert mark is not None, f"{block.where}: say what the example shows: <!-- json: DOCUMENT[, PATH] -->"
    name, where = mark
    example = parse_example(block.text)
    candidates = [documents[name]]
    for key in (where or "").split(".") if where else []:
        candidates = [
            value for one in candidates if isinstance(one, dict) for k, value in one.items() if key in ("*", k)
        ]
    tries = [match(example, one, f"{name}:{where or '$'}") for one in candidates]
    assert tries, f"{block.where}: {name} has nothing at {where}"
    assert min(tries, key=len) == [], f"{block.where}: " + "; ".join(min(tries, key=len))


# Files, links and anchors.

# The repository's top-level names: not its build outputs (build/, dist/: made by builds, ignored by git).
TOP = {path.name for path in REPO.iterdir() if not path.name.startswith(".git") and path.name not in ("build", "dist")}
PATH_IN_CODE = re.compile(r"`((?:\.\./)*(?:[\w.-]+/)*[\w.-]+/?)`")
ROOT_FILE = re.compile(r"^[\w-]+\.(ini|cfg|toml|txt|md|py|sh|yaml|yml)$")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def repo_path(text, doc):
    """The repository path an inline code span names (None: not one: a user's file, an option, code)."""
    text = text.split("#")[0].rstrip(":,")
    if " " in text or text.startswith(("-", "$", "~", "/", "http")) or "*" in text or "{" in text:
        return None
    parts = text.strip("/").split("/")
    if parts[0] == "..":
        return None
    if parts[0] in TOP and (len(parts) > 1 or text.endswith("/") or ROOT_FILE.match(parts[0])):
        return REPO / text
    if (
        len(parts) == 1
        and ROOT_FILE.match(text)
        and text.split(".")[-1] in ("ini", "cfg")
        or text
        in (
            "pyproject.toml",
            "setup.py",
            "CHANGELOG.md",
        )
    ):
        return REPO / text
    return None


def headings(path):
    """The GitHub anchors of a markdown file's headings."""
    found = set()
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        anchor = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
        found.add(anchor)
    return found


def test_named_repository_files_exist():
    missing = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in PATH_IN_CODE.finditer(text):
            target = repo_path(m.group(1), doc)
            if target is not None and not target.exists():
                line = text[: m.start()].count("\n") + 1
                missing.append(f"{doc.name}:{line}: `{m.group(1)}` is not in the repository")
    assert missing == []


def test_links_lead_to_files_and_headings():
    broken = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in LINK.finditer(text):
            target = m.group(1)
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            file, _, anchor = target.partition("#")
            path = (doc.parent / file).resolve() if file else doc
            line = text[: m.start()].count("\n") + 1
            if not path.exists():
                broken.append(f"{doc.name}:{line}: {target}: no such file")
            elif anchor and path.suffix == ".md" and anchor not in headings(path):
                broken.append(f"{doc.name}:{line}: {target}: no such heading")
    assert broken == []


# bench/ scripts named with their options.

BENCH = re.compile(r"python3? (bench/[a-z][\w-]*\.py)((?:\s+(?:--[\w-]+)(?:[ =](?!--)[^\s`,;)]+)?)*)")


def bench_mentions():
    found = []
    for doc in DOCS:
        text = re.sub(r"\s*\n\s*", " ", doc.read_text(encoding="utf-8"))
        for m in BENCH.finditer(text):
            found.append((doc.name, m.group(1), re.findall(r"--[\w-]+", m.group(2))))
    return found


def script_options(path):
    """The option strings a bench script's argparse parser declares (read from its source: --help of
    some would load torch or mteb first)."""
    import ast

    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
            found.update(a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("--"))
    return found


def test_bench_commands_name_real_scripts_and_options():
    mentions = bench_mentions()
    assert len(mentions) >= 15
    problems = []
    for doc, script, options in mentions:
        if not (REPO / script).is_file():
            problems.append(f"{doc}: {script} does not exist")
            continue
        declared = script_options(REPO / script)
        problems += [f"{doc}: {script} has no option {o}" for o in options if o not in declared]
    assert problems == []


def test_bench_scripts_measure_their_own_clone():
    """A bench script that imports embeval imports its own clone's, from any folder (bench/_checkout.py)."""
    import ast

    for path in sorted((REPO / "bench").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules = {
            alias.name.split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")])
        }
        if "embeval" in modules:
            source = path.read_text(encoding="utf-8")
            assert "_checkout" in modules or "sys.path" in source, f"{path.name} imports whichever embeval is installed"


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted({script for _, script, _ in bench_mentions()}))
def test_bench_script_starts_from_another_folder(script, tmp_path):
    done = subprocess.run(
        [sys.executable, REPO / script, "--help"],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{script} --help from another folder: {done.stderr[-800:]}"
    assert done.stdout.startswith("usage:")


# Counts.


def test_the_counts_of_tasks_are_the_registrys():
    from embeval.tasks.registry import TASKS

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    kinds = [task.kind for task in TASKS.values()]
    probing = sum(kind == "probing" for kind in kinds)
    m = re.search(r"(\d+) transfer tasks and (\d+) probing tasks", readme)
    assert m, "README's opening names the suite's size"
    # STSBenchmarkRaw is STS-B's test split as distributed (MTEB's STS-B), not a task of SentEval's suite
    transfer = sum(1 for name, task in TASKS.items() if task.kind != "probing" and name != "STSBenchmarkRaw")
    assert (int(m.group(1)), int(m.group(2))) == (transfer, probing)
    assert f"| {', '.join(n for n, t in TASKS.items() if t.kind == 'probing')} | probing |" in readme


def test_the_counts_of_the_worked_example_are_its_own():
    """docs/example's figures the docs quote: its number of tasks and of comparisons."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    comparison = (REPO / "docs" / "comparison.md").read_text(encoding="utf-8")
    record = json.loads((REPO / "docs" / "example" / "results-minilm.json").read_text())
    words = {"nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13}
    m = re.search(r"the (\w+) tasks of `docs/example`", re.sub(r"\s+", " ", readme))
    assert m and words.get(m.group(1), m.group(1)) == len(record["tasks"])
    compared = re.search(r"adjusted for the (\d+) comparisons", (REPO / "docs/example/compare.md").read_text())
    m = re.search(r"Holm's adjustment over its (\d+) comparisons", re.sub(r"\s+", " ", comparison))
    assert compared and m and m.group(1) == compared.group(1)


def test_no_test_counts_that_go_stale():
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        assert not re.search(r"\b\d[\d,]* tests\b", text), f"{doc.name} states a number of tests"
