"""`mlasim check` end to end on the real simulator: a library study passes, a broken claim fails
with both sides' values, a malformed file names its line and field."""

from __future__ import annotations

import shutil
from pathlib import Path

import typer
from typer.testing import CliRunner

from sim.cli.check import register

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _invoke(*args: str) -> tuple[int, str]:
    app = typer.Typer()
    register(app)

    @app.command()
    def _other() -> None:  # a second command keeps `check` a named subcommand
        """Unused."""

    result = CliRunner().invoke(app, ["check", *args])
    return result.exit_code, result.output


def _copy(name: str, tmp_path: Path, old: str = "", new: str = "") -> Path:
    text = (SCENARIOS / f"{name}.yaml").read_text()
    if old:
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    (tmp_path / "golden").mkdir(exist_ok=True)
    shutil.copy(SCENARIOS / "golden" / f"{name}.json", tmp_path / "golden" / f"{name}.json")
    return path


def test_library_scenario_passes_and_is_deterministic(tmp_path: Path) -> None:
    # expectations only (the stored goldens are checked by `mlasim check scenarios/` in CI)
    path = _copy("eplb-imbalance", tmp_path)
    code, out = _invoke(str(path), "--update-golden", "--jobs", "1")
    assert code == 0, out
    assert "PASS" in out and "all 1 scenarios passed" in out and "wrote" in out
    # a second run matches the golden it just wrote: same scenario and seed, same results
    code, out = _invoke(str(path), "--jobs", "1")
    assert code == 0, out
    assert "all 1 scenarios passed" in out


def test_breaking_a_claim_fails_with_both_values(tmp_path: Path) -> None:
    # DP attention with attention TP 8 is TP8 again: every GPU stores every token
    path = _copy(
        "dp-attention-vs-tp",
        tmp_path,
        "  - name: dp_ep\n    attn_tp: 1",
        "  - name: dp_ep\n    attn_tp: 8",
    )
    code, out = _invoke(str(path), "--jobs", "1")
    assert code == 1
    assert "FAIL dp-attention-vs-tp" in out and "1 of 1 scenarios failed" in out
    # the expectation, with the value substituted
    assert "dp_ep.kv_dup_factor (8) == 1" in out
    assert "dp_ep.kv_utilisation (" in out
    # the golden summary drifts too, shown with current and stored values
    line = next(ln for ln in out.splitlines() if "golden" in ln and "dp_ep.kv_dup_factor" in ln)
    assert "8" in line and "1" in line and "changed +700.00%" in line


def test_malformed_scenario_names_file_line_and_field(tmp_path: Path) -> None:
    bad = "  - {name: bf16, attn_tpp: 1}"
    path = _copy("fp8-kv", tmp_path, "  - {name: bf16, attn_tp: 1}", bad)
    code, out = _invoke(str(path), "--jobs", "1")
    assert code == 1 and "ERROR" in out
    line = path.read_text().splitlines().index(bad) + 1
    assert f"{path}:{line}: deployments[0].attn_tpp: unknown field" in out


def test_missing_golden_fails_until_updated(tmp_path: Path) -> None:
    _copy("eplb-imbalance", tmp_path)
    (tmp_path / "golden" / "eplb-imbalance.json").unlink()
    code, out = _invoke(str(tmp_path), "--jobs", "1")
    assert code == 1 and "--update-golden" in " ".join(out.split())
    code, out = _invoke(str(tmp_path), "--update-golden", "--jobs", "1")
    assert code == 0 and (tmp_path / "golden" / "eplb-imbalance.json").exists()


def test_missing_path_exits_2(tmp_path: Path) -> None:
    code, out = _invoke(str(tmp_path / "nope"))
    assert code == 2 and "no such file or folder" in out
