"""The installed package explains itself: every --help stands alone (no README sections or docs/ paths a
pip install does not have), `embeval --help` carries the vectors-file format, and `embeval docs TOPIC`
prints the repository's docs/ files (shipped in the wheel, not copied) offline."""

import ast
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from embeval.cli.docs import docs_folder, topics
from embeval.cli.main import cli

REPO = Path(__file__).resolve().parents[1]
CLONE_ONLY = re.compile(r"README|\bdocs/[\w-]+\.md|\bdocs/\b")
DOCS_POINTER = re.compile(r"embeval docs ([a-z][\w-]*)")


def every_command(group=cli, path=()):
    yield path
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from every_command(command, (*path, name))
        else:
            yield (*path, name)


def help_of(path):
    result = CliRunner().invoke(cli, [*path, "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    return result.output


COMMANDS = list(every_command())


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) or "embeval" for p in COMMANDS])
def test_help_points_only_to_what_an_install_has(path):
    text = help_of(path)
    assert CLONE_ONLY.findall(text) == [], f"`embeval {' '.join(path)} --help` points into a clone"
    assert [t for t in DOCS_POINTER.findall(text) if t not in topics()] == []


def test_top_level_help_carries_the_vectors_format():
    text = help_of(())
    for needed in ("/TASK", "sha256", "manifest.json", "/TASK.ROLE", "query, document", "/ALL", "--union"):
        assert needed in text, needed
    assert "embeval docs formats" in text and "embeval docs TOPIC" in text


def _strings_shown_to_users(tree):
    """String constants of a module that are not docstrings (those of click commands are checked as help)."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node


def test_messages_point_only_to_what_an_install_has():
    """Errors, hints and option help anywhere in the package: no docs/*.md path, no README section."""
    found = []
    for path in sorted((REPO / "embeval").rglob("*.py")):
        if path == REPO / "embeval" / "cli" / "docs.py":
            continue  # the module that reads README.md and docs/ for `embeval docs`
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in _strings_shown_to_users(tree):
            for match in CLONE_ONLY.finditer(node.value):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {match.group(0)}")
            found += [
                f"{path.relative_to(REPO)}:{node.lineno}: no topic {t}"
                for t in DOCS_POINTER.findall(node.value)
                if t not in topics()
            ]
    assert found == []


def test_docs_lists_every_topic_and_prints_the_files_themselves(cli):
    listed = cli("docs")
    assert listed.exit_code == 0, listed.output
    names = {path.stem for path in (REPO / "docs").glob("*.md")} | {"readme"}
    shown = {line.split()[0] for line in listed.stdout.splitlines()[1:]}
    assert shown == names and docs_folder() == REPO / "docs"
    formats = cli("docs", "formats")
    assert formats.exit_code == 0
    source = (REPO / "docs" / "formats.md").read_text(encoding="utf-8")
    assert formats.stdout.splitlines()[:40] == source.splitlines()[:40]  # the file itself, before its first link
    assert "(`embeval docs exporters`)" in formats.stdout or "`embeval docs exporters`" in formats.stdout
    assert "](exporters.md)" not in formats.stdout  # a link is written as the command that follows it
    readme = cli("docs", "README.md")
    assert readme.exit_code == 0 and readme.stdout.startswith("# embeval")


def test_an_unknown_topic_is_one_line(cli):
    result = cli("docs", "format")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == "embeval: error: format: no such topic (did you mean formats?); `embeval docs` lists them\n"


def test_every_topic_link_in_the_docs_leads_to_a_topic(cli):
    for topic in topics():
        text = cli("docs", topic).stdout
        assert [t for t in DOCS_POINTER.findall(text) if t not in topics()] == [], topic


@pytest.mark.slow
def test_the_wheel_alone_answers_the_vectors_format(tmp_path):
    """Built wheel -> a fresh virtual environment (its dependencies visible, not embeval's checkout) ->
    `embeval --help` and `embeval docs formats` from a folder outside any checkout, offline."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for folder in ("embeval", "exporters", "data", "docs"):  # every folder pyproject.toml installs
        shutil.copytree(REPO / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__", "cpp", "example"))
    pip = [sys.executable, "-m", "pip"]
    build = subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", tmp_path / "dist", source],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = (tmp_path / "dist").glob("embeval_offline-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [*pip, "--python", python, "install", "--no-deps", "--no-index", "-q", wheel], capture_output=True, text=True
    )
    assert installed.returncode == 0, installed.stderr
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # The dependencies (numpy, torch, click...) from this interpreter's site-packages, appended to the path
    # without running its .pth files (an editable install of a checkout there stays out of the way).
    Path(site, "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}

    def run(*args):
        done = subprocess.run([venv / "bin" / "embeval", *args], cwd=outside, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout

    where = subprocess.run(
        [python, "-c", "import embeval; print(embeval.__file__)"], cwd=outside, env=env, capture_output=True, text=True
    )
    assert where.stdout.strip().startswith(site), where.stdout + where.stderr  # the wheel's code, not a checkout's
    help_text = run("--help")
    assert "sha256" in help_text and "/TASK.ROLE" in help_text and "embeval docs formats" in help_text
    assert "readme" in run("docs") and "formats" in run("docs")
    formats = run("docs", "formats")
    assert formats.splitlines()[0] == "# The sentence export and the vectors file"
    for needed in ("attribute `sha256`", "/TASK.ROLE", "`/ALL`", "`tasks`"):
        assert needed in formats, needed
    assert run("docs", "readme").startswith("# embeval")  # the wheel's long description
    assert "--classifiers" in run("score", "--help")
    assert os.path.isfile(Path(site, "embeval", "_docs", "formats.md"))
