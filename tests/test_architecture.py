"""The package's shape: each folder a layer that imports only the layers below it, evaluators and
trainers free of I/O and user-interface libraries, and no import cycle anywhere."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "embeval"

# Lowest first. A module may import its own layer and the layers before it.
LAYERS = [
    ("embeval._version", "embeval.errors", "embeval.memory", "embeval.stats", "embeval.audit", "embeval.settings"),
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


def _runtime_nodes(tree):
    """Every node of the tree except those under `if TYPE_CHECKING:` (imports for type hints only,
    which never run)."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            skipped.update(id(n) for child in node.body for n in ast.walk(child))
    return [node for node in ast.walk(tree) if id(node) not in skipped]


def imports(path):
    """Every module `path` imports, at any depth (lazy imports inside functions included, imports for
    type hints only not); `from package import module` counts as importing the module, `from module
    import name` the module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rsplit(".", 1)[0]
    found = set()
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            for alias in node.names:
                target = f"{base}.{alias.name}"
                is_module = (PACKAGE.parent / target.replace(".", "/")).with_suffix(".py").is_file() or (
                    PACKAGE.parent / target.replace(".", "/") / "__init__.py"
                ).is_file()
                found.add(target if is_module else base)
    return found


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
