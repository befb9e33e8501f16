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
            assert block.lang == "python", f"{block.where}: a not-run marker before a {block.lang or 'shell'} block"
            assert len(block.not_run.split()) >= 2, f"{block.where}: say why the block is not run"


# Python blocks.


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory, data_dir):
    """The folder every Python block starts in (see the module's docstring)."""
    import devbow

    from embeval import export_sentences
    from embeval.formats.vectors import write

    root = tmp_path_factory.mktemp("sandbox")
    sts16 = "downstream/STS/STS16-en-test"
    shutil.copytree(data_dir / sts16, root / "data" / sts16)
    for name in ("rt-polarity.pos", "rt-polarity.neg"):
        lines = (data_dir / "downstream/MR" / name).read_bytes().splitlines(keepends=True)
        (root / "data/downstream/MR").mkdir(parents=True, exist_ok=True)
        (root / "data/downstream/MR" / name).write_bytes(b"".join(lines[:30]))
    _, skipped = export_sentences(root / "data", root / "sentences", tasks=["STS16", "MR"])
    assert not skipped
    write(root / "ckpt-2000.h5", root / "sentences", devbow.encode, progress=False)
    return root, devbow.encode


def h5_files(folder):
    return {path.relative_to(folder): path.read_bytes() for path in folder.rglob("*.h5")}


@pytest.mark.parametrize("block", PYTHON, ids=[block.where for block in PYTHON])
def test_python_block_runs(block, sandbox, tmp_path, monkeypatch):
    if block.not_run:
        pytest.skip(f"{block.where} not run: {block.not_run}")  # the reason is checked above
    from embeval.formats.vectors import check_against_manifest

    root, encode = sandbox
    here = tmp_path / "sandbox"
    shutil.copytree(root, here)
    before = h5_files(here)
    monkeypatch.chdir(here)
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
