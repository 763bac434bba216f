"""The dependency direction, read from the source: lower layers never import upper ones, and the
app reaches the simulator only through its public API (`sim.api`) and the spec classes."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# what sits above `sim.metrics` / `sim.io` in the chain (and the public API on top of it all)
UPPER = ("sim.run", "sim.cli", "sim.search", "sim.plan", "sim.api")
APP_ALLOWED = ("sim.api", "sim.specs")


def imported(path: Path) -> set[str]:
    """Every module `path` imports, at any depth (function-level imports included);
    `from a import b` counts as both `a` and `a.b`, since `b` may be a module."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") or name.startswith(p + "_") for p in prefixes)


def _modules(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (ROOT / f).rglob("*.py"))


def test_imported_sees_nested_and_from_imports(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("import os\nfrom sim import run\ndef f():\n    from sim.cli_run import x\n")
    assert {"os", "sim", "sim.run", "sim.cli_run", "sim.cli_run.x"} <= imported(src)
    assert _under("sim.cli_check", UPPER) and _under("sim.run", UPPER)
    assert not _under("sim.runner_x", ("sim.run",)) and not _under("sim.io", UPPER)


@pytest.mark.parametrize(
    "path",
    _modules("sim/specs", "sim/io", "sim/metrics", "sim/checks"),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_lower_layers_do_not_import_upper_ones(path: Path) -> None:
    bad = sorted(n for n in imported(path) if _under(n, UPPER))
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}: those depend on it, not the reverse"


# docs/architecture.md's chain, lowest first: the claim language of `sim.checks` sits below
# `sim.io` (the scenario loader vets claims with it), the check runner above (it reads files)
CHAIN = (
    "sim.specs", "sim.catalog", "sim.cost", "sim.engine", "sim.metrics", "sim.checks", "sim.io",
    "sim.checks.runner", "sim.run", "sim.search", "sim.plan", "sim.api", "sim.cli",
)  # fmt: skip


def _layer(name: str) -> int | None:
    found = [i for i, p in enumerate(CHAIN) if _under(name, (p,))]
    return max(found) if found else None


def test_no_module_imports_a_layer_above_its_own() -> None:
    bad = []
    for path in _modules("sim"):
        rel = path.relative_to(ROOT)
        mine = _layer(".".join(rel.with_suffix("").parts).removesuffix(".__init__"))
        if mine is None:
            continue
        for name in sorted(imported(path)):
            theirs = _layer(name)
            if theirs is not None and theirs > mine:
                bad.append(f"{rel} -> {name}")
    assert not bad, "imports against the dependency direction:\n" + "\n".join(bad)


def test_app_uses_only_the_public_api_and_specs() -> None:
    paths = _modules("app")
    assert len(paths) > 10  # the app is really there
    for path in paths:
        sim_names = {n for n in imported(path) if n == "sim" or n.startswith("sim.")}
        # `from sim.api import x` also yields `sim.api.x`; bare `sim` would be `import sim`
        bad = sorted(n for n in sim_names if not _under(n, APP_ALLOWED))
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}: use sim.api (or sim.specs)"


def test_the_api_exports_what_it_imports() -> None:
    import sim.api

    missing = [n for n in sim.api.__all__ if not hasattr(sim.api, n)]
    assert not missing
    public = {n for n in vars(sim.api) if not n.startswith("_") and n != "annotations"}
    assert public == set(sim.api.__all__)


def module_level_imports(path: Path) -> set[str]:
    """What `path` imports when it is imported: top-level statements (inside `if`/`try` blocks
    too), not function bodies, and not `if TYPE_CHECKING:` blocks (never run)."""
    names: set[str] = set()
    body = list(ast.parse(path.read_text(), filename=str(path)).body)
    while body:
        node = body.pop()
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.If):
            if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                body += node.body
            body += node.orelse
        elif isinstance(node, ast.Try):
            body += node.body + node.orelse + node.finalbody
            body += [n for h in node.handlers for n in h.body]
    return names


def test_module_level_imports_skip_functions_and_type_checking(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        "import os\nif TYPE_CHECKING:\n    import sim.engine\ndef f():\n    import sim.engine.run\n"
        "try:\n    import sim.cost\nexcept ImportError:\n    pass\n"
    )
    assert module_level_imports(src) == {"os", "sim.cost"}


@pytest.mark.parametrize("path", _modules("sim/cli"), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_cli_imports_no_engine_at_module_level(path: Path) -> None:
    """The engine (and simpy) load when a command that simulates runs, not when the CLI starts
    or a command module is imported for its help."""
    bad = sorted(n for n in module_level_imports(path) if _under(n, ("sim.engine", "simpy")))
    assert not bad, (
        f"{path.relative_to(ROOT)} imports {bad} at module level: import it in the command"
    )
