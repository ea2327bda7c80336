"""The layering of the packages: data flows isa -> machine -> compiler -> simulator -> fractal.

(a) A module imports only modules of its own stage or an earlier one; the machine description
    may use nothing of the program side but its errors (`isa.errors`).
(b) isa/, machine/, compiler/ and simulator/ import this project's modules only at module level:
    an import inside a function hides a cycle or a backward dependency from the reader.

The check reads the source (ast), so it sees every import, also those in functions that no test
happens to call.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: the stages in the order data flows; a module may import its own stage and earlier ones
STAGES = ("isa", "machine", "compiler", "simulator", "fractal")
#: the only modules of earlier stages a stage may import, where it may not import them all
ONLY = {"machine": {"isa": ("isa.errors",)}}
#: the packages whose modules are checked
CHECKED = ("isa", "machine", "compiler", "simulator")


def _imported(node: ast.Import | ast.ImportFrom, package: str) -> list[tuple[str, str]]:
    """(dotted name, name to report) of everything an import statement loads. `from a import b`
    may load module a.b, so it is checked as a.b (`from isa import errors` is isa.errors) and
    reported as module a, or as a.b when a is a top-level package. `package` is the importing
    module's package, against which relative imports resolve."""
    if isinstance(node, ast.Import):
        return [(alias.name, alias.name) for alias in node.names]
    target = node.module or ""
    if node.level:
        base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    return [(f"{target}.{alias.name}", target if "." in target else f"{target}.{alias.name}")
            for alias in node.names]


def _allowed(stage: str, name: str) -> bool:
    top = name.split(".")[0]
    if top not in STAGES:
        return True                                  # the standard library or a dependency
    if STAGES.index(top) > STAGES.index(stage):
        return False
    if top == stage:
        return True
    only = ONLY.get(stage, {}).get(top)
    return only is None or any(name == m or name.startswith(m + ".") for m in only)


def problems(source: str, path: str) -> list[str]:
    """Every layering problem of one module's source, as 'path:line: ...' with the import."""
    module = path.removesuffix(".py").replace("/", ".")
    package = module.removesuffix(".__init__") if module.endswith(".__init__") else \
        module.rpartition(".")[0]
    stage = module.split(".")[0]
    tree = ast.parse(source, path)
    found = []

    def visit(node, function: str | None):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, getattr(child, "name", "<lambda>"))
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                text = ast.get_source_segment(source, child) or ast.unparse(child)
                names = _imported(child, package)
                ours = list(dict.fromkeys(shown for name, shown in names
                                          if name.split(".")[0] in STAGES))
                bad = list(dict.fromkeys(shown for name, shown in names
                                         if not _allowed(stage, name)))
                for name in bad:
                    found.append(f"{path}:{child.lineno}: {stage} (stage {STAGES.index(stage)}) "
                                 f"imports {name} (stage {STAGES.index(name.split('.')[0])}): "
                                 f"`{text}`")
                if function is not None and ours:
                    found.append(f"{path}:{child.lineno}: function-level import of this "
                                 f"project's {', '.join(ours)} in {function}(): `{text}`")
            visit(child, function)

    visit(tree, None)
    return found


def _modules() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for pkg in CHECKED for p in (ROOT / pkg).rglob("*.py"))


def test_every_stage_has_modules():
    for pkg in CHECKED:
        assert any(m.startswith(pkg + "/") for m in _modules()), f"no modules found in {pkg}/"


@pytest.mark.parametrize("path", _modules())
def test_imports_follow_the_layers(path):
    found = problems((ROOT / path).read_text(encoding="utf-8"), path)
    assert not found, "\n".join(["imports against the layering:"] + found)


# ---------------------------------------------------------------- the checker itself

def test_a_backward_import_is_named_with_its_line():
    source = "import os\n\nfrom isa.errors import UserError\nfrom simulator.run import simulate\n"
    assert problems(source, "compiler/x.py") == [
        "compiler/x.py:4: compiler (stage 2) imports simulator.run (stage 3): "
        "`from simulator.run import simulate`"]


def test_the_machine_may_use_only_the_errors_of_the_program_side():
    ok = "from isa.errors import UserError\nfrom isa import errors\nfrom machine.limits import limit\n"
    assert problems(ok, "machine/x.py") == []
    bad = "from isa.errors import UserError\nfrom isa.limits import limit\nimport compiler\n"
    assert problems(bad, "machine/x.py") == [
        "machine/x.py:2: machine (stage 1) imports isa.limits (stage 0): "
        "`from isa.limits import limit`",
        "machine/x.py:3: machine (stage 1) imports compiler (stage 2): `import compiler`"]


def test_a_function_level_import_is_named_with_its_function():
    source = ("import math\n\n\ndef f():\n    import json\n    from isa.checker import check\n"
              "    return check\n")
    assert problems(source, "isa/x.py") == [
        "isa/x.py:6: function-level import of this project's isa.checker in f(): "
        "`from isa.checker import check`"]


def test_relative_imports_resolve_to_their_package():
    assert problems("from .errors import UserError\nfrom . import opcodes\n", "isa/x.py") == []
    assert problems("from .limits import limit\n", "machine/__init__.py") == []
    assert problems("from ..isa import limits\n", "machine/presets/x.py") == []    # machine.isa
    assert problems("def f():\n    from . import limits\n", "machine/x.py") == [
        "machine/x.py:2: function-level import of this project's machine.limits in f(): "
        "`from . import limits`"]


# ---------------------------------------------------------------- one way within a package

def _module_graph(pkg: str) -> dict[str, dict[str, int]]:
    """Module -> {module of the same package it imports at module level: line}; the package's
    __init__ (which gathers the public names) is left out."""
    names = {p.removesuffix(".py").replace("/", ".") for p in _modules() if p.startswith(pkg + "/")}
    graph = {}
    for module in sorted(n for n in names if not n.endswith("__init__")):
        tree = ast.parse((ROOT / (module.replace(".", "/") + ".py")).read_text(encoding="utf-8"))
        edges = {}
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for name, _ in _imported(node, module.rpartition(".")[0]):
                    for target in (name, name.rpartition(".")[0]):
                        if target in names and target != module:
                            edges.setdefault(target, node.lineno)
                            break
        graph[module] = edges
    return graph


@pytest.mark.parametrize("pkg", CHECKED)
def test_imports_within_a_package_run_one_way(pkg):
    graph = _module_graph(pkg)
    done, path = set(), []

    def visit(module):
        if module in path:
            cycle = path[path.index(module):] + [module]
            steps = [f"{a.replace('.', '/')}.py:{graph[a][b]} imports {b}"
                     for a, b in zip(cycle, cycle[1:])]
            raise AssertionError(f"an import cycle in {pkg}/: " + "; ".join(steps))
        if module in done:
            return
        path.append(module)
        for target in graph.get(module, {}):
            visit(target)
        path.pop()
        done.add(module)

    for module in graph:
        visit(module)
