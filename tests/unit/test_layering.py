"""The house rules of docs/design.md ("Architecture and layering", "Why this layout"), checked
on the source tree.

- models/ never imports impl/, impl/ never imports models/ (a model built from implementation
  code cannot find that code's bugs);
- spec/ imports nothing of ours;
- impl/ uses no ``os``, ``open``, ``time`` or ``random`` outside its seams
  (impl/fs/os_backend.py, impl/clock.py): I/O goes through the FileSystem seam, clocks and
  randomness are passed in;
- pyspark is imported in one module only (proofs/campaign/spark.py);
- every engine module is in :data:`MODEL_MAP`: paired with the model module at the same
  relative path under models/, or marked not modelled with the test that checks it instead.
  A new impl/ module fails here until it is mapped, so nobody adds engine code without
  saying what checks it.

The import checks parse every module with ``ast``, so an import inside a function counts too.
Each check is shown to fail on a synthetic input (a module importing os, a tree with an
unmapped module).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("spec", "impl", "models", "proofs")
#: Modules of impl/ allowed to touch the operating system directly.
IMPL_SEAMS = {"impl/fs/os_backend.py", "impl/clock.py", "impl/server/stdio.py"}
FORBIDDEN_IN_IMPL = {"os", "time", "random", "shutil", "tempfile", "pathlib", "io", "socket"}

#: The prefix of a MODEL_MAP value for an engine module with no model module of its own.
NOT_MODELLED = "not modelled: checked by "

#: Every engine module (impl/**/*.py but ``__init__.py``), paired with the model module at the
#: same relative path under models/ (docs/design.md, "Why this layout"), or, when it has none,
#: ``NOT_MODELLED + <path>`` naming the test (tests/**/test_*.py) or the spec file that checks
#: it. To map a new module: write its model at models/<same path> and name that, or name the
#: test that checks it.
MODEL_MAP: dict[str, str] = {
    "impl/bookie/bookie.py": "models/bookie/bookie.py",
    "impl/bookie/driver.py": NOT_MODELLED + "tests/unit/impl/bookie/test_driver.py",
    "impl/bookie/held.py": NOT_MODELLED + "tests/unit/impl/bookie/test_full_disk.py",
    "impl/bookie/reserve.py": NOT_MODELLED + "tests/unit/impl/bookie/test_full_disk.py",
    "impl/bookie/gc.py": NOT_MODELLED + "tests/unit/impl/bookie/test_gc.py",
    "impl/clock.py": NOT_MODELLED + "tests/unit/impl/bookie/test_driver.py",
    "impl/config/bk_keys.py": NOT_MODELLED + "tests/unit/impl/config/test_config.py",
    "impl/config/config.py": NOT_MODELLED + "tests/unit/impl/config/test_config.py",
    "impl/config/keys.py": NOT_MODELLED + "tests/unit/impl/config/test_keys.py",
    "impl/config/properties.py": NOT_MODELLED + "tests/unit/impl/config/test_properties.py",
    "impl/entrylog/buffered_channel.py": (
        NOT_MODELLED + "tests/unit/impl/entrylog/test_buffered_channel.py"
    ),
    "impl/entrylog/compactor.py": NOT_MODELLED + "tests/unit/impl/entrylog/test_compactor.py",
    "impl/entrylog/ids.py": NOT_MODELLED + "tests/unit/impl/entrylog/test_ids.py",
    "impl/entrylog/ledger_dirs.py": NOT_MODELLED + "tests/unit/impl/entrylog/test_ledger_dirs.py",
    "impl/entrylog/logger.py": NOT_MODELLED + "tests/unit/impl/entrylog/test_logger.py",
    "impl/entrylog/manager.py": "models/entrylog/manager.py",
    "impl/entrylog/per_ledger.py": NOT_MODELLED + "tests/unit/impl/entrylog/test_per_ledger.py",
    "impl/entrylog/slots.py": NOT_MODELLED + "tests/unit/impl/entrylog/test_slots.py",
    "impl/entrylog/reader.py": NOT_MODELLED + "tests/unit/impl/entrylog/test_reader.py",
    "impl/format/entry_log.py": NOT_MODELLED + "tests/unit/impl/format/test_entry_log_page.py",
    "impl/format/journal.py": NOT_MODELLED + "tests/unit/impl/format/test_journal_page.py",
    "impl/fs/api.py": NOT_MODELLED + "tests/unit/impl/fs/test_fs_equivalence.py",
    "impl/fs/os_backend.py": NOT_MODELLED + "tests/unit/impl/fs/test_os_backend.py",
    "impl/index/ledger_index.py": "models/index/ledger_index.py",
    "impl/index/rebuild.py": NOT_MODELLED + "tests/unit/impl/index/test_rebuild.py",
    "impl/index/bk_metadata.py": NOT_MODELLED + "tests/unit/impl/index/test_bk_metadata.py",
    "impl/journal/damage.py": NOT_MODELLED + "tests/unit/impl/bookie/test_damage.py",
    "impl/journal/journal.py": NOT_MODELLED + "tests/unit/impl/journal/test_journal.py",
    "impl/journal/last_mark.py": "models/journal/last_mark.py",
    "impl/server/dispatcher.py": NOT_MODELLED + "tests/unit/impl/server/test_dispatcher.py",
    "impl/server/protocol.py": NOT_MODELLED + "tests/unit/impl/server/test_protocol.py",
    "impl/server/stdio.py": NOT_MODELLED + "tests/unit/impl/server/test_stdio.py",
    "impl/bookie/ack.py": NOT_MODELLED + "tests/unit/impl/bookie/test_ack.py",
    "impl/bookie/checkpoint.py": NOT_MODELLED + "tests/unit/impl/bookie/test_checkpoint.py",
    "impl/bookie/layout.py": NOT_MODELLED + "tests/unit/impl/bookie/test_layout.py",
    "impl/bookie/directories.py": NOT_MODELLED + "tests/unit/impl/bookie/test_directories.py",
    "impl/bookie/identity.py": NOT_MODELLED + "tests/unit/impl/bookie/test_identity.py",
    "impl/format/identity.py": NOT_MODELLED + "tests/unit/impl/format/test_identity.py",
    "impl/bookie/recovery.py": NOT_MODELLED + "tests/unit/impl/bookie/test_recovery.py",
    "impl/bookie/state.py": NOT_MODELLED + "spec/state.py",
    "impl/format/ledger_index.py": NOT_MODELLED + "tests/unit/impl/format/test_ledger_index.py",
    "impl/format/names.py": NOT_MODELLED + "tests/unit/impl/format/test_names.py",
    "impl/format/bk_index.py": NOT_MODELLED + "tests/unit/impl/format/test_bk_index.py",
    "impl/journal/replay.py": NOT_MODELLED + "tests/unit/impl/journal/test_replay.py",
    "impl/limits.py": NOT_MODELLED + "tests/unit/impl/test_limits.py",
}

#: Model modules that pair with no engine module of the same path, and why.
STANDALONE_MODELS: dict[str, str] = {
    "models/fs/simdisk.py": "the simulated disk models the FileSystem seam (impl/fs/api.py) "
    "as a whole, and the engine runs on it",
    "models/entrylog/layout.py": "the rules every entry-log manager keeps (spec/format/"
    "entry_log.md, 'Rules every entry-log manager keeps'): they judge impl/entrylog/manager.py, "
    "impl/entrylog/per_ledger.py and impl/entrylog/slots.py alike, so no one impl/ module "
    "pairs with it",
    "models/index/heads.py": "the representation of models/index/ledger_index.py (a ledger's "
    "possible heads and its entries): what the model holds, not an impl/ module",
    "models/index/possible_worlds.py": "the reference the ledger model is tested against "
    "(every possible world, no factoring): it models the protocol, not an impl/ module",
}


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


def test_pyspark_is_imported_in_one_module_only() -> None:
    importers = [
        path.relative_to(ROOT).as_posix()
        for package in PACKAGES
        for path in _modules(package)
        if "pyspark" in _imported_roots(_parse(path))
    ]
    assert importers == ["proofs/campaign/spark.py"]


def test_the_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    # The rule must be able to fail: a module that imports os is caught.
    sample = tmp_path / "bad.py"
    sample.write_text("import os\nfrom time import monotonic\nopen('x')\n", encoding="utf-8")
    tree = _parse(sample)
    assert _imported_roots(tree) & FORBIDDEN_IN_IMPL == {"os", "time"}
    assert _calls_builtin_open(tree)


# --- MODEL_MAP: every engine module paired with its model or with the test that checks it ------


def _package_modules(root: Path, package: str) -> list[str]:
    """The modules of ``package`` under ``root``, relative, ``__init__.py`` left out."""
    return sorted(
        path.relative_to(root).as_posix()
        for path in (root / package).rglob("*.py")
        if path.name != "__init__.py"
    )


def model_map_problems(
    root: Path, model_map: Mapping[str, str], standalone: Mapping[str, str]
) -> list[str]:
    """What is wrong with ``model_map`` for the tree at ``root``: unmapped engine modules,
    entries for modules that do not exist, models that do not mirror their engine module's
    path or do not exist, "checked by" paths that are not an existing test or spec file, and
    model modules that pair with nothing."""
    problems: list[str] = []
    engine = _package_modules(root, "impl")
    for module in engine:
        if module not in model_map:
            problems.append(
                f"{module} is not in MODEL_MAP (tests/unit/test_layering.py): map it to its "
                f"model, models/{module.removeprefix('impl/')}, or to "
                f"NOT_MODELLED + '<the test that checks it>'"
            )
    for module, target in sorted(model_map.items()):
        if module not in engine:
            problems.append(f"MODEL_MAP maps {module}, which is not an impl/ module")
        if target.startswith(NOT_MODELLED):
            checked_by = target.removeprefix(NOT_MODELLED)
            is_test = checked_by.startswith("tests/") and Path(checked_by).name.startswith("test_")
            if not (is_test or checked_by.startswith("spec/")):
                problems.append(f"{module}: {checked_by} is neither a test nor a spec file")
            elif not (root / checked_by).is_file():
                problems.append(f"{module}: {checked_by} does not exist")
            continue
        mirror = "models/" + module.removeprefix("impl/")
        if target != mirror:
            problems.append(f"{module}: its model must be at {mirror}, the same path, not {target}")
        elif not (root / target).is_file():
            problems.append(f"{module}: its model {target} does not exist")
    paired = set(model_map.values())
    for model in _package_modules(root, "models"):
        if model not in paired and model not in standalone:
            problems.append(
                f"{model} models no impl/ module: pair it in MODEL_MAP or list it, with the "
                "reason, in STANDALONE_MODELS"
            )
    return problems


def test_every_impl_module_is_mapped_to_its_model_or_its_checker() -> None:
    assert model_map_problems(ROOT, MODEL_MAP, STANDALONE_MODELS) == []


def test_the_model_map_pairs_the_four_models_by_path() -> None:
    # Guards against a map that passes by marking everything "not modelled".
    paired = {module for module, target in MODEL_MAP.items() if target.startswith("models/")}
    assert paired == {
        "impl/bookie/bookie.py",
        "impl/entrylog/manager.py",
        "impl/index/ledger_index.py",
        "impl/journal/last_mark.py",
    }


def test_the_model_map_check_fails_on_a_bad_tree(tmp_path: Path) -> None:
    for module in (
        "impl/__init__.py",
        "impl/x/a.py",
        "impl/x/b.py",
        "impl/x/c.py",
        "impl/x/d.py",
        "impl/x/e.py",
        "models/x/a.py",
        "models/y/c.py",
        "models/y/z.py",
        "tests/unit/test_b.py",
    ):
        (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / module).write_text("", encoding="utf-8")
    good = {
        "impl/x/a.py": "models/x/a.py",
        "impl/x/b.py": NOT_MODELLED + "tests/unit/test_b.py",
        "impl/x/c.py": NOT_MODELLED + "tests/unit/test_b.py",
        "impl/x/d.py": NOT_MODELLED + "spec/nothing.md",
        "impl/x/e.py": NOT_MODELLED + "tests/unit/test_b.py",
    }
    standalone = {"models/y/c.py": "synthetic", "models/y/z.py": "synthetic"}
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec/nothing.md").write_text("", encoding="utf-8")
    assert model_map_problems(tmp_path, good, standalone) == []

    bad = {
        "impl/x/a.py": "models/x/a.py",
        "impl/x/b.py": NOT_MODELLED + "tests/unit/test_missing.py",  # no such test
        "impl/x/c.py": "models/y/c.py",  # a model at another path
        "impl/x/e.py": NOT_MODELLED + "docs/design.md",  # not a test or spec file
        "impl/x/gone.py": "models/x/gone.py",  # no such engine module
    }  # impl/x/d.py unmapped
    problems = model_map_problems(tmp_path, bad, {"models/y/c.py": "synthetic"})
    assert problems == [
        "impl/x/d.py is not in MODEL_MAP (tests/unit/test_layering.py): map it to its model, "
        "models/x/d.py, or to NOT_MODELLED + '<the test that checks it>'",
        "impl/x/b.py: tests/unit/test_missing.py does not exist",
        "impl/x/c.py: its model must be at models/x/c.py, the same path, not models/y/c.py",
        "impl/x/e.py: docs/design.md is neither a test nor a spec file",
        "MODEL_MAP maps impl/x/gone.py, which is not an impl/ module",
        "impl/x/gone.py: its model models/x/gone.py does not exist",
        "models/y/z.py models no impl/ module: pair it in MODEL_MAP or list it, with the "
        "reason, in STANDALONE_MODELS",
    ]
