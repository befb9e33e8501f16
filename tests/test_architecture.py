"""The package's shape: each folder a layer that imports only the layers below it, evaluators and
trainers free of I/O and user-interface libraries, and no import cycle anywhere."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "embeval"

# Lowest first. A module may import its own layer and the layers before it.
LAYERS = [
    (
        "embeval._version",
        "embeval._kernels",
        "embeval.errors",
        "embeval.memory",
        "embeval.stats",
        "embeval.audit",
        "embeval.settings",
        "embeval.threads",
        "embeval.untrusted",
    ),
    ("embeval.tasks",),
    ("embeval.formats", "embeval.datasets"),
    ("embeval.train",),
    ("embeval.evaluate",),
    ("embeval.kinds",),
    ("embeval.run",),
    ("embeval.reports",),
    ("embeval.cli", "embeval.__main__", "embeval"),
]
PURE = ("embeval.evaluate", "embeval.train", "embeval.kinds")
NOT_IN_PURE = (
    "click",
    "tqdm",
    "h5py",
    "embeval.cli",
    "embeval.run",
    "embeval.formats.vectors",
    "embeval.formats.atomic",
)


def module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


HOW = ("module", "deferred", "types")


def _type_only_nodes(tree):
    """The nodes under `if TYPE_CHECKING:` (imports for type hints only, which never run)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            found.update(id(n) for child in node.body for n in ast.walk(child))
    return found


def _deferred_nodes(tree):
    """The nodes inside a function's body (imports deferred until the function runs)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            found.update(id(n) for child in ast.iter_child_nodes(node) for n in ast.walk(child))
    return found


def import_edges(path):
    """{module: how} for every module `path` imports, `how` being "module" (at import time),
    "deferred" (inside a function) or "types" (under `if TYPE_CHECKING:`, for type hints only);
    `from package import module` counts as importing the module, `from module import name` the module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rsplit(".", 1)[0]
    type_only, deferred = _type_only_nodes(tree), _deferred_nodes(tree)
    found = {}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        how = "types" if id(node) in type_only else "deferred" if id(node) in deferred else "module"
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            for alias in node.names:
                target = f"{base}.{alias.name}"
                where = PACKAGE.parent / target.replace(".", "/")
                # a Python module, a package, or a compiled module (its C source beside: embeval/_kernels.c)
                is_module = (
                    any(where.with_suffix(suffix).is_file() for suffix in (".py", ".c"))
                    or (where / "__init__.py").is_file()
                )
                targets.append(target if is_module else base)
        for target in targets:  # the strongest way wins: at import time, else deferred, else for types only
            if target not in found or HOW.index(how) < HOW.index(found[target]):
                found[target] = how
    return found


def imports(path):
    """Every module `path` imports when it runs, at any depth (imports deferred into functions
    included, imports for type hints only not)."""
    return {target for target, how in import_edges(path).items() if how != "types"}


def graph():
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    edges = {}
    for name, path in modules.items():
        edges[name] = {target for target in imports(path) if target in modules and target != name}
    return edges


def layer(name):
    """The index of the layer a module belongs to (None: none)."""
    best = None
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (index, len(prefix))
    return None if best is None else best[0]


def test_every_module_belongs_to_a_layer_and_imports_only_lower_ones():
    assert [name for name in graph() if layer(name) is None] == []
    upward = []
    for name, targets in graph().items():
        for target in targets:
            if layer(target) > layer(name):
                upward.append(f"{name} imports {target}")
    assert upward == [], upward


def test_evaluators_and_trainers_import_no_io_or_interface_library():
    offending = []
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        if name.startswith(PURE):
            for target in imports(path):
                if any(target == bad or target.startswith(bad + ".") for bad in NOT_IN_PURE):
                    offending.append(f"{name} imports {target}")
    assert offending == [], offending


def test_no_import_cycles():
    edges = graph()
    cycles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for target in sorted(edges[node]):
            if state.get(target) == "open":
                cycles.append(stack[stack.index(target) :] + [target])
            elif target not in state:
                visit(target, stack)
        stack.pop()
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [])
    assert cycles == [], cycles


def full_graph():
    """{module: {imported module: how}} over every import written in the package's modules."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {
        name: {t: how for t, how in import_edges(path).items() if t in modules and t != name}
        for name, path in modules.items()
    }


def hidden_cycles(edges):
    """Cycles that a deferred import keeps from failing at import time: an import A -> B inside a
    function while B reaches A again through any import (at import time, deferred, or for type hints
    only, which says B is written in terms of A). Each as the path A -> B -> ... -> A."""
    found = []
    for start, targets in sorted(edges.items()):
        for first, how in sorted(targets.items()):
            if how != "deferred":
                continue
            paths, seen = [[start, first]], {first}
            while paths:
                path = paths.pop(0)
                if path[-1] == start:
                    found.append(path)
                    break
                for nxt in sorted(edges.get(path[-1], {})):
                    if nxt not in seen or nxt == start:
                        seen.add(nxt)
                        paths.append(path + [nxt])
    return found


def test_no_deferred_import_hides_a_cycle():
    """Deferring an import into a function makes a cycle import without error, and the walk of run-time
    imports above then shows none; the modules still need each other. None may."""
    assert hidden_cycles(full_graph()) == []


def test_the_walk_sees_a_planted_upward_import_and_cycle(tmp_path, monkeypatch):
    """The checks above are only as good as the graph: a planted violation must show in it."""
    fake = tmp_path / "embeval"
    for sub in ("train", "cli"):
        (fake / sub).mkdir(parents=True)
        (fake / sub / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    (fake / "train" / "loop.py").write_text("import click\nfrom embeval.cli import main\n")
    (fake / "cli" / "main.py").write_text("from embeval.train import loop\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake)
    edges = graph()
    assert "embeval.cli.main" in edges["embeval.train.loop"] and "embeval.train.loop" in edges["embeval.cli.main"]
    assert layer("embeval.cli.main") > layer("embeval.train.loop")
    assert "click" in imports(fake / "train" / "loop.py")


def test_the_walk_sees_cycles_hidden_by_deferred_imports(tmp_path, monkeypatch):
    """spec imports catalog inside a function; catalog imports spec for type hints only, or inside a
    function too, or at import time: each a cycle, though the first two import without error."""
    fake = tmp_path / "embeval"
    (fake / "tasks").mkdir(parents=True)
    for name in ("__init__.py", "tasks/__init__.py", "tasks/kind.py"):
        (fake / name).write_text("")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake)
    (fake / "tasks" / "spec.py").write_text("def kind():\n    from embeval.tasks.catalog import lookup\n")
    for catalog in (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from embeval.tasks.spec import TaskSpec\n",
        "def loader():\n    from embeval.tasks import spec\n",
        "import embeval.tasks.kind\nfrom embeval.tasks.spec import TaskSpec\n",
    ):
        (fake / "tasks" / "catalog.py").write_text(catalog)
        assert ["embeval.tasks.spec", "embeval.tasks.catalog", "embeval.tasks.spec"] in hidden_cycles(full_graph())
    (fake / "tasks" / "catalog.py").write_text("import embeval.tasks.kind\n")
    assert hidden_cycles(full_graph()) == []


# No module outside embeval/tasks/ and embeval/kinds/ names a task or a kind: what a task is and how
# its kind is scored and shown is declared there (senteval.toml, a kind's module) and reached through
# the TaskSpec, never by a literal. Other things called `kind` are compared with literals in these
# modules, for these reasons (numpy's dtype.kind codes are recognised wherever they appear):
OTHER_KINDS = {
    "embeval.datasets.archives": "an archive's kind (zip, tar, gzip, msi, plain)",
    "embeval.datasets.preprocess": "an archive's kind (zip, tar, gzip, msi, plain)",
    "embeval.train.features": "the layout of a pair's features (single, pair, snli)",
}
OWNERS = ("embeval.tasks", "embeval.kinds")
# Not exempt, and holding no name: embeval/datasets/ reads which built-in tasks each of SentEval's data
# sets serves from data/sources.json (a fact of the data sources, checked below against the
# registry), and quickstart scores the tasks declared with `quickstart = true`.


def task_words():
    """Every name, alias and short name of a built-in task, and every kind name (old ones too)."""
    from embeval.tasks.catalog import KINDS
    from embeval.tasks.registry import builtin

    names = {word for spec in builtin().values() for word in (spec.name, spec.label, *spec.aliases)}
    return names, set(KINDS)


def _is_kind(node):
    """`x.kind`, `x["kind"]` or `x.get("kind")`."""
    if isinstance(node, ast.Attribute):
        return node.attr == "kind"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "kind"
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == "kind"
    )


def _is_dtype_kind(node):
    """numpy's `<array>.dtype.kind`, `dtype.kind` or `np.dtype(x).kind`."""
    owner = node.value if isinstance(node, ast.Attribute) else None
    return (
        (isinstance(owner, ast.Attribute) and owner.attr == "dtype")
        or (isinstance(owner, ast.Name) and owner.id == "dtype")
        or (isinstance(owner, ast.Call) and isinstance(owner.func, ast.Attribute) and owner.func.attr == "dtype")
    )


def _strings(node):
    """The string literals of a literal or of a tuple, list or set of literals."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for element in node.elts for s in _strings(element)]
    return []


def task_literals(path, names, kinds, exempt_kind_comparisons=False):
    """Lines of `path` holding a string literal equal to a task or kind name, or comparing a `kind`
    with a literal (unless exempt: a module comparing another kind of `kind`), each once, in order."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in names:
                found.append(f"{path.name}:{node.lineno}: the task name {node.value!r}")
            elif node.value in kinds:
                found.append(f"{path.name}:{node.lineno}: the kind name {node.value!r}")
        elif isinstance(node, ast.Compare) and not exempt_kind_comparisons:
            sides = [node.left, *node.comparators]
            if any(_is_kind(side) and not _is_dtype_kind(side) for side in sides) and any(map(_strings, sides)):
                found.append(f"{path.name}:{node.lineno}: a kind compared with a literal")
    return sorted(set(found), key=lambda line: (int(line.split(":")[1]), line))


def test_no_module_outside_tasks_and_kinds_names_a_task_or_a_kind():
    names, kinds = task_words()
    assert {"STSBenchmark", "STS-B", "SICK-E", "COCO", "MR"} <= names and {"sts", "classification"} <= kinds
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        if name.startswith(OWNERS):
            continue
        found += [f"{name}: {line}" for line in task_literals(path, names, kinds, name in OTHER_KINDS)]
    assert found == []


def test_the_literal_check_sees_a_planted_task_name_and_kind_comparison(tmp_path):
    names, kinds = task_words()
    planted = tmp_path / "planted.py"
    planted.write_text(
        "def f(spec, entry, table):\n"
        "    if spec.kind == 'relatedness' or entry['kind'] in ('sts', 'x') or entry.get('kind') != 'new-kind':\n"
        "        return {'STS-B': 1, 'name': 'SICKRelatedness'}\n"
        "    return table.dtype.kind == 'f' and spec.name != 'MyOwnTask'\n",
        encoding="utf-8",
    )
    assert task_literals(planted, names, kinds) == [
        "planted.py:2: a kind compared with a literal",
        "planted.py:2: the kind name 'relatedness'",
        "planted.py:2: the kind name 'sts'",
        "planted.py:3: the task name 'SICKRelatedness'",
        "planted.py:3: the task name 'STS-B'",
    ]
    assert task_literals(planted, names, kinds, exempt_kind_comparisons=True) == [
        "planted.py:2: the kind name 'relatedness'",
        "planted.py:2: the kind name 'sts'",
        "planted.py:3: the task name 'SICKRelatedness'",
        "planted.py:3: the task name 'STS-B'",
    ]


def test_the_data_sources_serve_built_in_tasks():
    """data/sources.json names tasks (the one place outside embeval/tasks/ that does): each is a
    built-in task, and every built-in task with data to fetch has a source."""
    from embeval.datasets.sources import load_sources
    from embeval.tasks.registry import builtin

    served = [task for dataset in load_sources().values() for task in dataset.tasks]
    assert [task for task in served if task not in builtin()] == []
    assert set(builtin()) - set(served) == set()
