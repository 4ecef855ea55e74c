"""The portkit code that computes a cache entry, found by following its imports.

A cache key holds the source of the code that computed the entry, so that a change to that code
is a new key and a cache is only ever slower, never stale. A hand-kept list of modules goes stale
itself (the reference cache's list missed stored_vocab.py and sampling.py, whose values it
caches). Here a cache names the modules where its computation starts, and the key covers every
portkit module they import, transitively: at module level or inside a function, `from pkg import
mod` included, and a module named whole in a string (`python -m portkit...`,
`importlib.import_module`). `if TYPE_CHECKING:` blocks never run and are not followed. The
packages a module sits in are part of it (importing it runs their `__init__`).

Reading is static (`ast`): nothing is imported, so torch stays out of a process that only keys.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from collections.abc import Iterable, Iterator
from pathlib import Path

PACKAGE = "portkit"
#: the directory holding the `portkit` package this process runs
_HERE = Path(__file__).resolve().parents[2]


def module_file(name: str, base: Path = _HERE) -> Path | None:
    """The source file of portkit module `name` under `base` (a package's `__init__.py`), or None."""
    parts = name.split(".")
    if parts[0] != PACKAGE or not all(p.isidentifier() for p in parts):
        return None
    path = base.joinpath(*parts)
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _nodes(node: ast.AST) -> Iterator[ast.AST]:
    """Every node under `node` that can run: the body of `if TYPE_CHECKING:` is skipped (its `else` is not)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.orelse:
                yield stmt
                yield from _nodes(stmt)
            continue
        yield child
        yield from _nodes(child)


def _named(name: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a `from ... import` names (relative levels resolved against `name`)."""
    if node.level == 0:
        return node.module or ""
    parts = name.split(".")
    anchor = parts if is_package else parts[:-1]
    anchor = anchor[: len(anchor) - (node.level - 1)]
    return ".".join(anchor + ([node.module] if node.module else []))


def imported(name: str, source: str, is_package: bool) -> set[str]:
    """The module names that module `name` (its `source`) may import when it runs."""
    names: set[str] = set()
    for node in _nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _named(name, is_package, node)
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)  # `from pkg import mod`
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(PACKAGE + "."):
            names.add(node.value)
    return names


def closure(roots: Iterable[str], base: Path = _HERE) -> dict[str, Path]:
    """Every portkit module the `roots` run, by name, with its file (the roots and their packages included).
    A root that is no module is an error: a moved module would otherwise stop keying its entries."""
    found: dict[str, Path] = {}
    todo = list(roots)
    for root in todo:
        if module_file(root, base) is None:
            raise FileNotFoundError(
                f"portkit.verify.code_closure: no module {root} under {base} (it moved: name its new place)"
            )
    while todo:
        name = todo.pop()
        if name in found:
            continue
        path = module_file(name, base)
        if path is None:
            continue  # not portkit's, or `from mod import function`: the module itself is in already
        found[name] = path
        parents = [".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)]
        todo.extend(parents)
        todo.extend(imported(name, path.read_text(encoding="utf-8"), path.name == "__init__.py"))
    return found


def digest(roots: Iterable[str], base: Path = _HERE) -> str:
    """SHA-256 over the names and bytes of `closure(roots)`: a change to any of that code is a new digest."""
    h = hashlib.sha256()
    for name, path in sorted(closure(roots, base).items()):
        h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


@functools.cache
def code_digest(roots: tuple[str, ...]) -> str:
    """`digest(roots)` of the portkit this process runs, read once per process (its files do not change under it)."""
    return digest(roots)
