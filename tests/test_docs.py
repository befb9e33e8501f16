"""The documentation works as written: README.md and docs/*.md.

- Every ```python block runs, in a fresh copy of a small sandbox as the current folder: data/ (SentEval's
  layout, with STS16 and a 60-sentence MR), sentences/ (their export, manifest.json included),
  ckpt-2000.h5 (vectors of that export), and `encode` (list of str -> (n, 128) float32
  array, the devbow encoder) in its namespace. Every HDF5 file a block writes that holds datasets must then
  pass `embeval vectors check` against sentences/. A block that cannot run there is preceded by
  `<!-- not run: REASON -->`; a marker without a reason, or before another kind of block, fails.
- Every `embeval ...` command of a shell block (after `&&`, `;` and `|` too; continuation lines
  joined; `[...]` optional parts unwrapped) parses as the command line would parse it, and
  `embeval COMMAND --help` lists every option it uses, and every option its trailing comment names (of
  the command the comment names, if it names one).
- Inline code: every `embeval COMMAND --option` names a real command and options of it, and every
  `embeval.module.name` resolves.
"""

import functools
import importlib
import re
import shlex
import shutil
from pathlib import Path

import click
import h5py
import pytest
from click.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL = ("", "sh", "bash", "shell", "console")
NOT_RUN = re.compile(r"<!--\s*not run:(.*?)-->", re.S)
FENCE = re.compile(r"^```(\S*)\s*$")


class Block:
    def __init__(self, path, line, lang, text, not_run):
        self.path, self.line, self.lang, self.text, self.not_run = path, line, lang, text, not_run

    @property
    def where(self):
        return f"{Path(self.path).name}:{self.line}"


def blocks(text, path="doc.md"):
    """The fenced blocks of a markdown text, each with the reason of a `<!-- not run: ... -->` marker on
    the line(s) just before it (None without one)."""
    lines = text.splitlines()
    found, i = [], 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        start, body = i, []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise ValueError(f"{path}:{start + 1}: code block never closed")
        before = "\n".join(lines[max(0, start - 3) : start])
        marker = [m for m in NOT_RUN.finditer(before) if not before[m.end() :].strip()]
        not_run = marker[-1].group(1).strip() if marker else None
        found.append(Block(path, start + 1, fence.group(1), "\n".join(body) + "\n", not_run))
        i += 1
    return found


ALL_BLOCKS = [block for path in DOCS for block in blocks(path.read_text(encoding="utf-8"), path)]
PYTHON = [block for block in ALL_BLOCKS if block.lang == "python"]


def test_not_run_markers_need_a_reason():
    text = (
        "<!-- not run: needs a GPU -->\n```python\nimport cupy\n```\n\n"
        "<!-- not run: -->\n```python\nx = 1\n```\n\n```python\ny = 2\n```\n"
    )
    first, second, third = blocks(text)
    assert (first.not_run, second.not_run, third.not_run) == ("needs a GPU", "", None)
    for block in ALL_BLOCKS:
        if block.not_run is not None:
            assert block.lang == "python" or block.lang in SHELL, (
                f"{block.where}: a not-run marker before a {block.lang} block"
            )
            assert len(block.not_run.split()) >= 2, f"{block.where}: say why the block is not run"


# Python blocks.


LAYOUTS = ("plain", "union", "roles")
RETRIEVAL_TOML = """name = "DocRetrieval"
kind = "retrieval"
[files]
corpus = "ret/corpus.jsonl"
queries = "ret/queries.jsonl"
qrels = "ret/qrels/test.tsv"
"""


def write_retrieval_task(folder):
    """A small BEIR-layout retrieval task (12 documents, 4 queries) and its task file in `folder`:
    the task file path."""
    import json

    ret = folder / "ret"
    (ret / "qrels").mkdir(parents=True, exist_ok=True)
    words = ["cat", "dog", "bird", "fish", "tree", "rock", "lake", "hill", "road", "city", "farm", "ship"]
    docs = [{"_id": f"d{i}", "title": w, "text": f"a {w} near the {words[(i + 1) % 12]}"} for i, w in enumerate(words)]
    queries = [{"_id": f"q{i}", "text": f"where is the {words[3 * i]}"} for i in range(4)]
    (ret / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    (ret / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    qrels = ["query-id\tcorpus-id\tscore"] + [f"q{i}\td{3 * i}\t1" for i in range(4)]
    (ret / "qrels" / "test.tsv").write_text("\n".join(qrels) + "\n", encoding="utf-8")
    (folder / "retrieval.toml").write_text(RETRIEVAL_TOML, encoding="utf-8")
    return folder / "retrieval.toml"


def make_sandbox(root, data_dir, layout):
    """A folder as a user has it after exporting: data/ (STS16, a 60-sentence MR), sentences/ (their
    export in the layout: per task, --union, or with a retrieval task's lists per role), ckpt-2000.h5."""
    import devbow

    from embeval import export_sentences
    from embeval.formats.vectors import write

    sts16 = "downstream/STS/STS16-en-test"
    shutil.copytree(data_dir / sts16, root / "data" / sts16)
    for name in ("rt-polarity.pos", "rt-polarity.neg"):
        lines = (data_dir / "downstream/MR" / name).read_bytes().splitlines(keepends=True)
        (root / "data/downstream/MR").mkdir(parents=True, exist_ok=True)
        (root / "data/downstream/MR" / name).write_bytes(b"".join(lines[:30]))
    tasks, task_files = ["STS16", "MR"], []
    if layout == "roles":
        task_files = [write_retrieval_task(root)]
        tasks.append("DocRetrieval")
    _, skipped = export_sentences(
        root / "data", root / "sentences", tasks=tasks, union=layout == "union", task_files=task_files
    )
    assert not skipped
    write(root / "ckpt-2000.h5", root / "sentences", devbow.encode, progress=False)
    return root


@pytest.fixture(scope="module", params=LAYOUTS)
def sandbox(request, tmp_path_factory, data_dir):
    """The folder every Python block starts in (see the module's docstring), in each export layout."""
    import devbow

    return make_sandbox(tmp_path_factory.mktemp(f"sandbox-{request.param}"), data_dir, request.param), devbow.encode


def h5_files(folder):
    return {path.relative_to(folder): path.read_bytes() for path in folder.rglob("*.h5")}


# A program the docs tell the user to run names itself in its first line:
# `# my_encoder.py, run as: python my_encoder.py sentences/ vectors.h5`.
PROGRAM = re.compile(r"#\s*([\w-]+\.py)\b.*?\bpython3? \1 ([^\n]*)")
RUN_PYTHON = [block for block in PYTHON if not block.not_run]  # the others' reasons are checked above


@pytest.mark.parametrize("block", RUN_PYTHON, ids=[block.where for block in RUN_PYTHON])
def test_python_block_runs(block, sandbox, tmp_path, monkeypatch):
    from embeval.formats.vectors import check_against_manifest

    root, encode = sandbox
    here = tmp_path / "sandbox"
    shutil.copytree(root, here)
    before = h5_files(here)
    monkeypatch.chdir(here)
    program = PROGRAM.match(block.text)
    if program:  # a program the docs run with arguments: run with those
        monkeypatch.setattr("sys.argv", [program.group(1), *shlex.split(program.group(2))])
    exec(compile(block.text, block.where, "exec"), {"__name__": "__doc__", "encode": encode})
    for name, data in h5_files(here).items():
        if before.get(name) == data:
            continue
        with h5py.File(here / name, "r") as f:
            if not len(f):
                continue
        report = check_against_manifest(here / name, here / "sentences")
        assert [problem for _, problem in report if problem] == [], (block.where, name, report)


# Commands.


def command_of(words):
    """(click command, its path such as ['data', 'fetch'], the remaining arguments) of `embeval WORDS`."""
    from embeval.cli.main import cli

    command, path = cli, []
    while isinstance(command, click.Group):
        assert words and words[0] in command.commands, f"`embeval {' '.join(path + words[:1])}` is not a command"
        path.append(words[0])
        command, words = command.commands[words[0]], words[1:]
    return command, path, words


@functools.cache
def help_text(path):
    from embeval.cli.main import cli

    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    return result.output


def options_in(words):
    return [word.split("=", 1)[0] for word in words if re.fullmatch(r"--[a-z][a-z0-9-]*(=.*)?", word)]


def assert_listed(path, options, where):
    text = help_text(tuple(path))
    for option in options:
        assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text), (
            f"{where}: `embeval {' '.join(path)} --help` does not list {option}"
        )


def shell_commands(block):
    """(words after `embeval`, option names in the line's comment with the command they belong to) of
    every `embeval` command in a shell block."""
    text = re.sub(r"\\\n\s*", " ", block.text)
    found = []
    for line in text.splitlines():
        code, comment = line, ""
        hash_mark = re.search(r"(^|\s)#\s", line)
        if hash_mark:
            code, comment = line[: hash_mark.start()], line[hash_mark.end() :]
        if not re.search(r"(^|[;&|]\s*)embeval\s", code.strip()):
            continue  # not a command line of embeval (pip, python, program output)
        lexer = shlex.shlex(code, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        segments, current = [], []
        for token in lexer:
            if token in (";", "&&", "||", "|", "&"):
                segments.append(current)
                current = []
            else:
                current.append(token)
        segments.append(current)
        for words in segments:
            if words and words[0] == "embeval":
                words = [w.strip("[]") for w in words[1:] if w.strip("[]")]
                found.append((words, comment))
    return found


SHELL_COMMANDS = [
    (block.where, words, comment)
    for block in ALL_BLOCKS
    if block.lang in SHELL
    for words, comment in shell_commands(block)
]


def test_the_docs_have_shell_commands_to_check():
    assert len(SHELL_COMMANDS) >= 30 and any(words[:2] == ["data", "fetch"] for _, words, _ in SHELL_COMMANDS)


@pytest.mark.parametrize(
    "where, words, comment", SHELL_COMMANDS, ids=[f"{w}:{' '.join(c[:2])}" for w, c, _ in SHELL_COMMANDS]
)
def test_shell_command_parses(where, words, comment):
    command, path, args = command_of(words)
    try:
        command.make_context(f"embeval {' '.join(path)}", list(args), resilient_parsing=False)
    except click.ClickException as err:
        pytest.fail(f"{where}: `embeval {' '.join(words)}`: {err.format_message()}")
    assert_listed(path, options_in(args), where)
    owner, named = path, []
    comment_words = comment.split()
    for i, word in enumerate(comment_words):
        if word == "embeval" and i + 1 < len(comment_words):
            _, owner_path, _ = command_of(comment_words[i + 1 : i + 3])
            assert_listed(owner, named, where)
            owner, named = owner_path, []
        named += options_in([word.strip(".,;:()")])
    assert_listed(owner, named, where)


# Inline code.


INLINE = re.compile(r"`(embeval [^`]+)`")
DOTTED = re.compile(r"`(embeval(?:\.\w+)+)[`(]")


def inline(pattern):
    return [
        (f"{path.name}:{text[: m.start()].count(chr(10)) + 1}", m.group(1))
        for path in DOCS
        for text in [path.read_text(encoding="utf-8")]
        for m in pattern.finditer(text)
    ]


def test_inline_commands_name_real_commands_and_options():
    mentions = inline(INLINE)
    assert len(mentions) >= 40
    problems = []
    for where, mention in mentions:
        words = [w.strip("[]…") for w in mention.split()[1:]]
        try:
            if words and words[0].startswith("-"):  # an option of `embeval` itself (--help, --version)
                assert_listed([], options_in(words), f"{where}: `{mention}`")
                continue
            _, path, args = command_of([w for w in words if w])
            assert_listed(path, options_in(args), f"{where}: `{mention}`")
        except AssertionError as err:
            problems.append(str(err).splitlines()[0])
    assert problems == []


def resolves(dotted):
    parts = dotted.split(".")
    target = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], start=1):
        try:
            target = getattr(target, part)
        except AttributeError:
            try:
                target = importlib.import_module(".".join(parts[: i + 1]))
            except ModuleNotFoundError:
                return False
    return True


def test_inline_python_names_resolve():
    mentions = inline(DOTTED)
    assert mentions
    assert [f"{where}: `{dotted}` does not exist" for where, dotted in mentions if not resolves(dotted)] == []


# Shell blocks, run as a user runs them.
#
# Every shell block runs with bash from a fresh folder outside the repository (a sandbox of the plain,
# union or roles layout above), `embeval` on the PATH running this checkout, and EMBEVAL_DATA=data/.
# The folder also holds the parts of a clone the docs' commands read from its root (SHIPPED: the ranking
# example's task files), and what the docs tell the user to bring: `my_encoder.py DIR FILE` (the README's
# program, which declares itself in its first line; else a stand-in embedding an export with the hashing
# bag of words), a.h5 and b.h5 (two encoders' vectors of STS16), the task
# files the docs show with their path in a first comment line (`# my-tasks/reviews.toml`) and the
# data those name. The all-MiniLM-L6-v2 exporter is replaced by the bag of words (the same options;
# seconds instead of minutes). A block that cannot run here (it installs packages, downloads, needs a
# GPU, a compiler, a cluster or SentEval's full data) is preceded by `<!-- not run: REASON -->`; a block
# that is program output, a diagram or a fragment is fenced as `text`. `python bench/SCRIPT.py` (written
# from a clone's root) runs as `python CLONE/bench/SCRIPT.py`, from that other folder.

SHELL_BLOCKS = [block for block in ALL_BLOCKS if block.lang in SHELL]
SHIPPED = ("docs/example/rank",)
TOML_PATH = re.compile(r"^#\s*([\w./-]+\.toml)\b")
MY_ENCODER = """import subprocess, sys
exporter = {exporter!r}
sys.exit(subprocess.call([sys.executable, exporter, "--export", sys.argv[1], "--out", sys.argv[2], "--overwrite"]))
"""


def declared_task_files():
    """{path: text} of the TOML blocks that name their path in a first comment line, and of the Python
    programs that name themselves (PROGRAM)."""
    found = {}
    for block in ALL_BLOCKS:
        match = TOML_PATH.match(block.text) if block.lang == "toml" else None
        if match:
            found[match.group(1)] = block.text
        program = PROGRAM.match(block.text) if block.lang == "python" and not block.not_run else None
        if program:
            found[program.group(1)] = block.text
    return found


def write_reviews(path):
    """text<TAB>label rows: 40 reviews of two labels."""
    rng = __import__("random").Random(0)
    good, bad = ["good", "great", "fine", "nice"], ["bad", "awful", "poor", "dull"]
    rows = ["text\tlabel"]
    for i in range(40):
        label = ("pos", "neg")[i % 2]
        rows.append(f"a {rng.choice(good if label == 'pos' else bad)} film number {i}\t{label}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def user_folder(tmp_path_factory, data_dir):
    """The folder a shell block starts in (copied for each block) and the environment it runs with."""
    import os

    import devbow

    from embeval.formats.vectors import write

    root = make_sandbox(tmp_path_factory.mktemp("user"), data_dir, "plain")
    write_retrieval_task(root)  # ret/: the data of the README's retrieval.toml
    for shipped in SHIPPED:  # what a clone holds that the docs' commands read from its root
        shutil.copytree(REPO / shipped, root / shipped)
    write_reviews(root / "my-tasks" / "reviews.tsv")
    for path, text in declared_task_files().items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    if not (root / "my_encoder.py").is_file():  # the README's own program when it declares one
        (root / "my_encoder.py").write_text(MY_ENCODER.format(exporter=str(REPO / "exporters" / "bow_numpy.py")))
    from embeval import export_sentences

    export_sentences(root / "data", root / "sts16", tasks=["STS16"])
    for name, seed in (("a.h5", 0), ("b.h5", 1)):
        write(root / name, root / "sts16", lambda texts, s=seed: devbow.encode(texts) + 0.05 * s, progress=False)
    shutil.rmtree(root / "sts16")
    bin_dir = tmp_path_factory.mktemp("bin")
    (bin_dir / "embeval").write_text(f'#!/bin/sh\nexec "{__import__("sys").executable}" -m embeval "$@"\n')
    (bin_dir / "embeval").chmod(0o755)
    env = dict(
        os.environ,
        PATH=f"{bin_dir}:{os.environ['PATH']}",
        PYTHONPATH=str(REPO),
        EMBEVAL_DATA=str(root / "data"),
        HF_HUB_OFFLINE="1",
    )
    return root, env


def test_the_programs_the_docs_run_are_the_docs_own():
    """`python my_encoder.py sentences/ vectors.h5` runs the README's program, which reads its arguments."""
    programs = declared_task_files()
    assert "my_encoder.py" in programs and "sys.argv" in programs["my_encoder.py"]


def test_every_shell_block_runs_or_says_why_not():
    assert len(SHELL_BLOCKS) > 20
    for block in SHELL_BLOCKS:
        assert block.not_run is None or len(block.not_run.split()) >= 2, f"{block.where}: say why"
    assert [b.where for b in SHELL_BLOCKS if b.not_run is None], "no shell block runs"


RUN_SHELL = [block for block in SHELL_BLOCKS if not block.not_run]  # the others' reasons: the test above


@pytest.mark.slow
@pytest.mark.parametrize("block", RUN_SHELL, ids=[block.where for block in RUN_SHELL])
def test_shell_block_runs(block, user_folder, tmp_path):
    import subprocess

    root, env = user_folder
    here = tmp_path / "user"
    shutil.copytree(root, here)
    script = block.text.replace("embeval.exporters.sentence_transformers_export", "embeval.exporters.bow_numpy")
    script = script.replace("exporters/sentence_transformers_export.py", "exporters/bow_numpy.py")
    script = re.sub(r"\bpython3? bench/", f"python {REPO}/bench/", script)  # a clone's script, run from elsewhere
    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script], cwd=here, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"{block.where}:\n{script}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
