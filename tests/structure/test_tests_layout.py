"""The tests mirror the code: every test file sits in `tests/<package>/`, named for the `sim`
package or module it tests (or a top-level package such as `app`), so a reader finds a module's
tests by its name. pytest imports test files by their bare name (rootdir, no `__init__.py`), so
a module name may be used once across all test directories."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"

# Directories not named for a package, and why:
#   fuzz       generated inputs across every layer (`make fuzz`, issue #25's reproducers)
#   structure  checks on the source tree itself (import direction, this layout)
#   fixtures   data files the tests read, no test code
#   bench      the helpers of `bench/`'s scripts (`make bench`), which are scripts, not a package
EXCEPTIONS = {"fuzz", "structure", "fixtures", "bench"}
# files directly under tests/: the shared fixtures and the shared scenario builders
TOP_LEVEL = {"conftest.py", "builders.py"}


def package_names() -> set[str]:
    """`sim`'s subpackages and modules, and the repository's top-level packages."""
    sim = ROOT / "sim"
    names = {p.name for p in sim.iterdir() if (p / "__init__.py").is_file()}
    names |= {p.stem for p in sim.glob("*.py") if p.stem != "__init__"}
    names |= {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file() and p.name != "sim"}
    return names


def _python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def test_package_names_are_read_from_the_tree() -> None:
    names = package_names()
    assert {"engine", "cost", "specs", "io", "run", "app"} <= names
    assert "tests" not in names and "__init__" not in names


def test_every_test_file_sits_under_a_package_directory() -> None:
    allowed = package_names() | EXCEPTIONS
    misplaced = []
    for path in _python_files():
        rel = path.relative_to(TESTS)
        if len(rel.parts) == 1:
            if rel.name not in TOP_LEVEL:
                misplaced.append(str(rel))
        elif rel.parts[0] not in allowed:
            misplaced.append(str(rel))
    assert not misplaced, (
        f"test files outside a package directory: {misplaced}; move each to "
        f"tests/<package>/ for the package it tests (one of {sorted(package_names())})"
    )


def test_every_exception_directory_exists() -> None:
    """An exception for a directory that no longer exists would hide a misplaced one later."""
    gone = sorted(d for d in EXCEPTIONS if not (TESTS / d).is_dir())
    assert not gone, f"EXCEPTIONS names {gone}, which no longer exist; remove them from the list"


def test_test_module_names_are_unique() -> None:
    names = Counter(p.name for p in _python_files() if p.name != "conftest.py")
    twice = sorted(n for n, k in names.items() if k > 1)
    assert not twice, f"module names used in two test directories (pytest imports by name): {twice}"
