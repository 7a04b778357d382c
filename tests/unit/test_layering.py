"""The house rules of docs/design.md, checked on the source tree.

- models/ never imports impl/, impl/ never imports models/ (a model built from implementation
  code cannot find that code's bugs);
- spec/ imports nothing of ours;
- impl/ uses no ``os``, ``open``, ``time`` or ``random`` outside its fs backend: I/O goes
  through the FileSystem seam, clocks and randomness are passed in;
- pyspark is imported in at most one module.

The check parses every module with ``ast``, so an import inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("spec", "impl", "models", "proofs")
#: Modules of impl/ allowed to touch the operating system directly.
IMPL_SEAMS = {"impl/fs/os_backend.py", "impl/clock.py", "impl/server/stdio.py"}
FORBIDDEN_IN_IMPL = {"os", "time", "random", "shutil", "tempfile", "pathlib", "io", "socket"}


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _imported_roots(tree: ast.AST) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def _calls_builtin_open(tree: ast.AST) -> bool:
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open"
        for node in ast.walk(tree)
    )


def _parse(path: Path) -> ast.AST:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_every_package_has_modules() -> None:
    # Guards the checks below against passing vacuously on an empty or moved tree.
    for package in PACKAGES:
        assert _modules(package), f"{package}/ has no modules"


@pytest.mark.parametrize("path", _modules("models"), ids=str)
def test_models_never_import_impl(path: Path) -> None:
    roots = _imported_roots(_parse(path))
    assert "impl" not in roots, f"{path} imports impl/"
    assert "proofs" not in roots, f"{path} imports proofs/"


@pytest.mark.parametrize("path", _modules("impl"), ids=str)
def test_impl_never_imports_models(path: Path) -> None:
    roots = _imported_roots(_parse(path))
    assert "models" not in roots, f"{path} imports models/"
    assert "proofs" not in roots, f"{path} imports proofs/"


@pytest.mark.parametrize("path", _modules("spec"), ids=str)
def test_spec_imports_nothing_of_ours(path: Path) -> None:
    roots = _imported_roots(_parse(path))
    ours = roots & {"impl", "models", "proofs"}
    assert not ours, f"{path} imports {sorted(ours)}"


@pytest.mark.parametrize("path", _modules("impl"), ids=str)
def test_impl_touches_the_os_only_through_its_seams(path: Path) -> None:
    relative = path.relative_to(ROOT).as_posix()
    if relative in IMPL_SEAMS:
        return
    tree = _parse(path)
    bad = _imported_roots(tree) & FORBIDDEN_IN_IMPL
    assert not bad, f"{relative} imports {sorted(bad)}: use the FileSystem/Clock/Random seams"
    assert not _calls_builtin_open(tree), f"{relative} calls open(): use the FileSystem seam"


def test_pyspark_is_imported_in_at_most_one_module() -> None:
    importers = [
        path
        for package in PACKAGES
        for path in _modules(package)
        if "pyspark" in _imported_roots(_parse(path))
    ]
    assert len(importers) <= 1, importers


def test_the_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    # The rule must be able to fail: a module that imports os is caught.
    sample = tmp_path / "bad.py"
    sample.write_text("import os\nfrom time import monotonic\nopen('x')\n", encoding="utf-8")
    tree = _parse(sample)
    assert _imported_roots(tree) & FORBIDDEN_IN_IMPL == {"os", "time"}
    assert _calls_builtin_open(tree)
