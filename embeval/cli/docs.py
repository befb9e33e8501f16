"""`embeval docs [TOPIC]`: the documentation, offline, from the installed package.

The topics are the repository's docs/*.md files (pyproject.toml installs the folder as
`embeval/_docs/`; a source checkout reads docs/ itself) and the README (`readme`), which a wheel
carries as its long description. Nothing is copied: what `embeval docs` prints is those files.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import click

from embeval.cli.common import fails_cleanly
from embeval.errors import EmbevalError

README = "readme"
_LINK = re.compile(r"\[([^\]]+)\]\((?:\.\./)?(?:docs/)?([\w-]+)\.md(?:#([\w-]+))?\)")
_README_LINK = re.compile(r"\[([^\]]+)\]\((?:\.\./)?README\.md(?:#([\w-]+))?\)")


def docs_folder() -> Path | None:
    """The folder of the docs/*.md files: installed beside the package, else the checkout's docs/."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "_docs", package.parent / "docs"):
        if (candidate / "formats.md").is_file():
            return candidate
    return None


def readme_text() -> str | None:
    """The README: the checkout's file, else the installed distribution's long description."""
    root = Path(__file__).resolve().parents[2]
    if (root / "README.md").is_file() and (root / "pyproject.toml").is_file():  # a source checkout
        return (root / "README.md").read_text(encoding="utf-8")
    from importlib.metadata import PackageNotFoundError, metadata

    try:
        meta = metadata("embeval-offline")
    except PackageNotFoundError:
        return None
    body = meta.get_payload() if hasattr(meta, "get_payload") else None  # the long description (metadata 2.1+)
    return body or next(iter(meta.get_all("Description") or []), None)


def topics() -> dict[str, str]:
    """{topic: its title} of every topic this installation has, the README first."""
    found = {}
    text = readme_text()
    if text is not None:
        found[README] = "overview: install, the workflow, the vectors file, results, tasks, exit codes"
    folder = docs_folder()
    for path in sorted(folder.glob("*.md")) if folder else []:
        first = path.read_text(encoding="utf-8").lstrip().splitlines()[:1]
        found[path.stem] = first[0].lstrip("# ").strip() if first else path.stem
    return found


def topic_text(name: str) -> str:
    """The text of a topic, its links to other topics written as `embeval docs TOPIC`."""
    known = topics()
    key = name.lower().removesuffix(".md")
    if key not in known:
        near = difflib.get_close_matches(key, known, n=1)
        hint = f" (did you mean {near[0]}?)" if near else ""
        raise EmbevalError(f"no such topic{hint}; `embeval docs` lists them", file=name)
    if key == README:
        text = readme_text() or ""
    else:
        folder = docs_folder()
        assert folder is not None  # the topic was found in it
        text = (folder / f"{key}.md").read_text(encoding="utf-8")
    text = _README_LINK.sub(lambda m: _pointer(m.group(1), README), text)
    return _LINK.sub(lambda m: _pointer(m.group(1), m.group(2)), text)


def _pointer(text: str, topic: str) -> str:
    """A link to another topic as a terminal reader follows it."""
    if text.strip("`").endswith(".md"):  # the link's text is the file's name
        return f"`embeval docs {topic}`"
    return f"{text} (`embeval docs {topic}`)"


@click.command("docs")
@click.argument("topic", required=False, metavar="[TOPIC]")
@fails_cleanly
def docs(topic: str | None) -> None:
    """Print a topic of embeval's documentation (Markdown), offline; without TOPIC, list the topics.

    \b
    embeval docs formats     the sentence export and the vectors file (HDF5 layout, sha256, roles, --union)
    embeval docs scoring     every option of `embeval score`, the protocols, speed
    embeval docs readme      the overview
    """
    if topic is None:
        known = topics()
        if not known:
            raise EmbevalError("the documentation is missing from this installation; reinstall embeval", file="docs")
        width = max(map(len, known))
        click.echo("Topics (embeval docs TOPIC prints one):")
        for name, title in known.items():
            click.echo(f"  {name:{width}s}  {title}")
        return
    click.echo(topic_text(topic), nl=False)
