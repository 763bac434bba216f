"""The `mlasim` command: physics, catalog, simulation, checks, calibration and the app."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from sim import cli_physics
from sim.catalog import gpu_names, load_gpu, load_model, model_names
from sim.cli_run import register as register_run
from sim.cli_search import register as register_search
from sim.io.check import register as register_check

app = typer.Typer(
    name="mlasim",
    help="Simulate GPU clusters serving MLA + MoE models; compare deployments.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()

app.command()(cli_physics.cost)
app.command()(cli_physics.ai)
app.command()(cli_physics.memory)


@app.command()
def models() -> None:
    """The bundled model catalog."""
    t = Table(title="Models")
    for col in ("name", "attention", "layers", "heads", "experts (top-k)", "MTP", "DSA"):
        t.add_column(col)
    for name in model_names():
        m = load_model(name)
        t.add_row(
            name,
            m.attention.upper(),
            str(m.num_layers),
            str(m.num_heads),
            f"{m.moe.n_routed_experts} ({m.moe.experts_per_token})",
            str(m.mtp_layers),
            "yes" if m.dsa else "-",
        )
    console.print(t)


@app.command()
def gpus() -> None:
    """The bundled GPU catalog (datasheet figures)."""
    t = Table(title="GPUs")
    for col in ("name", "BF16 TFLOP/s", "FP8 TFLOP/s", "HBM GB", "HBM TB/s", "ridge FLOP/B"):
        t.add_column(col, justify="right")
    for name in gpu_names():
        g = load_gpu(name)
        t.add_row(
            name,
            f"{g.bf16_tflops:g}",
            f"{g.fp8_tflops:g}",
            f"{g.hbm_gb:g}",
            f"{g.hbm_tb_s:g}",
            f"{g.ridge_flop_per_byte:.0f}",
        )
    console.print(t)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def calibrate(ctx: typer.Context) -> None:
    """Time the real kernels on this machine's GPU (or CPU) and write a profile.

    Arguments are passed to `python -m kernels_calib` (see its --help).
    """
    from kernels_calib.__main__ import main as calib_main

    raise typer.Exit(code=calib_main(list(ctx.args)))


@app.command(name="app")
def run_app(port: int = typer.Option(8501, help="Local port.")) -> None:
    """Start the Streamlit capacity-planning app on a local port."""
    script = Path(__file__).resolve().parent.parent / "app" / "streamlit_app.py"
    if not script.exists():
        raise cli_physics.usage_error(f"app not found at {script}")
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(script),
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
    ]
    raise typer.Exit(code=subprocess.call(cmd))


register_run(app)
register_check(app)
register_search(app)


def main() -> None:
    app()
