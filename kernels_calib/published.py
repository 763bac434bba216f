"""Build the bundled 'published' and 'roofline' profiles from published kernel benchmarks.

    python -m kernels_calib.published --out sim/catalog/profiles [--csv-dir DIR]
    python -m kernels_calib.published aic ...   (production-kernel profiles: published_aic)

DIR holds the kernel CSVs of alibaba/InferSim (bench_data/; default: a `shared/reference/kernels`
folder beside the repo, where the team keeps a copy).
Writes `h800-published`, `h20-published` and `<gpu>-roofline` for every catalog GPU.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from kernels_calib import published_figures as fig
from kernels_calib import published_tables as pt
from kernels_calib.roofline_factors import derive
from kernels_calib.writer import model_shape, write_profile
from sim.catalog import gpu_names, load_gpu
from sim.specs.profile import (
    SCHEMA_VERSION,
    DeviceInfo,
    Factor,
    OpTable,
    Profile,
    RooflineFactors,
)

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CSV_DIR = REPO.parent / "shared" / "reference" / "kernels"
SHAPE_MODEL = "deepseek-v3"  # the CSVs' MLA shape: 128 heads, latent 512, rope 64, qk 192/v 128
DEVICE_NAMES = {"h800": "NVIDIA H800 SXM5", "h20": "NVIDIA H20"}


def published_tables(gpu: str, csv_dir: Path, notes: list[str]) -> list[OpTable]:
    """Every published table for `gpu` ('h800' or 'h20')."""
    m = model_shape(SHAPE_MODEL).mla_spec()
    tables = pt.mla_decode(csv_dir, gpu, m, notes) + pt.gemm(csv_dir, gpu, notes)
    tables += pt.grouped_gemm(csv_dir, gpu, "decode", notes)
    tables += pt.grouped_gemm(csv_dir, gpu, "prefill", notes)
    if gpu == "h800":
        tables += pt.mla_prefill(csv_dir, gpu, m, notes) + pt.dsa(csv_dir, m, notes)
        tables += pt.deepep(notes)
    return tables


def _override(factors: RooflineFactors, **changes: Factor) -> RooflineFactors:
    return factors.model_copy(update=changes)


def roofline_for(gpu: str, csv_dir: Path) -> tuple[RooflineFactors, list[str]]:
    """Factors for a catalog GPU, from its own published tables where there are any.

    H100/H200 share H800's SM90 kernels, so they take H800's factors; B200 takes FlashMLA's B200
    sparse prefill and decode figures for attention and H800's factors for the rest.
    """
    own = gpu if gpu in ("h800", "h20") else "h800"
    notes: list[str] = []
    tables = published_tables(own, csv_dir, [])
    h800 = None
    if own != "h800":
        h800, _ = derive(published_tables("h800", csv_dir, []), load_gpu("h800"), "h800-published")
    factors, derive_notes = derive(
        tables, load_gpu(own), f"{own}-published", h800, "H800's published kernels"
    )
    notes += derive_notes
    if gpu != own:
        notes.append(f"{gpu}: no kernel benchmarks bundled; factors from H800's published kernels")
    if gpu == "b200":
        peak = load_gpu("b200").bf16_tflops
        factors = _override(
            factors,
            attention_compute_efficiency=Factor(
                value=fig.FLASHMLA_B200_SPARSE_PREFILL_TFLOPS / peak,
                source="deepseek-ai/FlashMLA README: sparse MLA prefill "
                f"{fig.FLASHMLA_B200_SPARSE_PREFILL_TFLOPS:g} TFLOP/s on B200 / {peak:g} BF16 peak",
            ),
            sparse_decode_compute_efficiency=Factor(
                value=fig.FLASHMLA_B200_SPARSE_DECODE_TFLOPS / peak,
                source="deepseek-ai/FlashMLA README: sparse MLA decode (FP8 KV) "
                f"~{fig.FLASHMLA_B200_SPARSE_DECODE_TFLOPS:g} TFLOP/s on B200 / {peak:g} BF16 peak",
            ),
        )
    return factors, notes


def build_published(gpu: str, csv_dir: Path) -> Profile:
    notes: list[str] = []
    tables = published_tables(gpu, csv_dir, notes)
    factors, factor_notes = roofline_for(gpu, csv_dir)
    if gpu == "h800":  # measured on an H100 SXM5: a table of the profile, not of its factors
        tables += pt.mla_verify(model_shape(SHAPE_MODEL).mla_spec(), notes)
    if gpu == "h20":
        notes.append("no DeepEP or DSA figures for H20: ep_* and dsa_* ops fall back to roofline")
    return Profile(
        schema_version=SCHEMA_VERSION,
        name=f"{gpu}-published",
        kind="published",
        description=f"{gpu.upper()} kernel latencies published by InferSim"
        + (" and DeepEP" if gpu == "h800" else ""),
        device=DeviceInfo(name=DEVICE_NAMES[gpu], gpu=gpu),
        model_shape=model_shape(SHAPE_MODEL),
        tables=tables,
        roofline=factors,
        notes=sorted(set(notes + factor_notes), key=(notes + factor_notes).index),
    )


def build_roofline(gpu: str, csv_dir: Path) -> Profile:
    factors, notes = roofline_for(gpu, csv_dir)
    spec = load_gpu(gpu)
    return Profile(
        schema_version=SCHEMA_VERSION,
        name=f"{gpu}-roofline",
        kind="roofline",
        description=f"{spec.display_name}: datasheet roofline with efficiency factors from "
        "published kernel benchmarks",
        device=DeviceInfo(name=spec.display_name, gpu=gpu),
        roofline=factors,
        notes=notes,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] == ["aic"]:
        from kernels_calib import published_aic  # needs pandas, as only the converter does

        return published_aic.main(args_in[1:])
    parser = argparse.ArgumentParser(prog="python -m kernels_calib.published", description=__doc__)
    parser.add_argument("--out", type=Path, default=REPO / "sim" / "catalog" / "profiles")
    parser.add_argument("--csv-dir", type=Path, default=DEFAULT_CSV_DIR)
    args = parser.parse_args(args_in)
    if not (args.csv_dir / "mla").is_dir():
        parser.error(f"{args.csv_dir} does not hold the kernel CSVs (mla/, gemm/, ...)")
    args.out.mkdir(parents=True, exist_ok=True)
    profiles = [build_published(g, args.csv_dir) for g in ("h800", "h20")]
    profiles += [build_roofline(g, args.csv_dir) for g in gpu_names()]
    for profile in profiles:
        path = write_profile(profile, args.out / f"{profile.name}.json")
        points = sum(len(t.points) for t in profile.tables)
        print(f"{path}: {len(profile.tables)} tables, {points} points")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
