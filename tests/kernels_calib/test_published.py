"""The published profiles reproduce the kernel CSVs they were built from; rebuilding matches."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from kernels_calib import published
from kernels_calib import published_figures as fig
from kernels_calib.grids import full_grids
from kernels_calib.roofline_factors import derive
from sim.catalog import CATALOG_DIR, load_gpu
from sim.catalog.profiles import load_profile
from sim.cost.calibrated import CalibratedCost
from tests.cost.calibrated_query import estimate, table_work

CSV_DIR = published.DEFAULT_CSV_DIR
needs_csvs = pytest.mark.skipif(not (CSV_DIR / "mla").is_dir(), reason=f"no CSVs at {CSV_DIR}")


def rows(rel: str) -> list[dict[str, str]]:
    with (CSV_DIR / rel).open() as fh:
        return list(csv.DictReader(fh))


def us(cost: CalibratedCost, op: str, attrs: dict[str, object], key: set[str], dtype: str) -> float:
    mla = cost.profile.model_shape.mla_spec()  # type: ignore[union-attr]
    flops, nbytes = table_work(op, attrs, mla=mla, dtype=dtype)
    est = estimate(
        cost,
        op,
        key={k: v for k, v in attrs.items() if k in key},
        point={k: v for k, v in attrs.items() if k not in key},  # type: ignore[misc]
        flops=flops,
        bytes_=nbytes,
        dtype=dtype,
    )
    assert not est.extrapolated and est.source == "published"
    return est.seconds * 1e6


@needs_csvs
def test_flashmla_decode_points_match_the_csv() -> None:
    cost = CalibratedCost(load_profile("h800-published"), load_gpu("h800"))
    data = rows("mla/decode/h800/128-512-64.csv")
    assert len(data) == 41
    for r in data:
        attrs = {
            "batch": float(r["batch_size"]),
            "kv_len": float(r["kv_len"]),
            "s_q": 1,
            "kv_dtype": r["kv_dtype"],
            "heads": 128,
        }
        got = us(cost, "mla_decode", attrs, {"s_q", "kv_dtype", "heads"}, "bf16")
        assert got == pytest.approx(float(r["latency_us"]), rel=1e-9)
    bs64 = next(r for r in data if r["batch_size"] == "64" and r["kv_len"] == "4096")
    assert float(bs64["latency_us"]) == pytest.approx(155.153)


def test_an_mtp_verify_reads_flashmla_measured_at_two_query_tokens() -> None:
    """Two query tokens per request (one draft token's verify) read FlashMLA's own s_q-2
    measurement at its points, as measured; one token still reads InferSim's tables, and the
    second token costs more than nothing and less than a second pass over the cache."""
    cost = CalibratedCost(load_profile("h800-published"), load_gpu("h800"))
    key = {"s_q", "kv_dtype", "heads"}
    batch = float(fig.FLASHMLA_H100_VERIFY_BATCH)
    for kv, measured in fig.FLASHMLA_H100_VERIFY_US.items():
        at = {"batch": batch, "kv_len": float(kv), "kv_dtype": "bf16", "heads": 128}
        verify = us(cost, "mla_decode", {**at, "s_q": 2}, key, "bf16")
        decode = us(cost, "mla_decode", {**at, "s_q": 1}, key, "bf16")
        assert verify == pytest.approx(measured, rel=1e-9)
        assert decode < verify < 2 * decode


def test_the_verify_table_is_not_among_h800s_factor_sources() -> None:
    """It was measured on an H100 SXM5: the H800 roofline factors come from H800's own tables."""
    profile = load_profile("h800-published")
    verify = [t for t in profile.tables if t.op == "mla_decode" and t.key["s_q"] == 2]
    assert [t.source for t in verify] == [fig.FLASHMLA_H100_RUN]
    own = [t for t in profile.tables if t not in verify]
    h800 = load_gpu("h800")
    assert derive(own, h800, "h800-published")[0] == profile.roofline
    with_verify = derive(profile.tables, h800, "h800-published")[0]
    assert with_verify.attention_compute_efficiency != profile.roofline.attention_compute_efficiency


@needs_csvs
def test_gemm_and_grouped_gemm_points_match_the_csv() -> None:
    cost = CalibratedCost(load_profile("h800-published"), load_gpu("h800"))
    for r in rows("gemm/h800/data.csv"):
        attrs = {"m": float(r["m"]), "k": int(r["k"]), "n": int(r["n"])}
        assert us(cost, "gemm", attrs, {"k", "n"}, "fp8") == pytest.approx(float(r["latency_us"]))
    for phase, tokens in (("decode", "batch_size_per_gpu"), ("prefill", "seq_len_per_gpu")):
        for r in rows(f"grouped_gemm/{phase}/h800/data.csv"):
            tpe = (
                float(r[tokens]) * float(r["num_gpus"]) * float(r["topk"]) / float(r["num_experts"])
            )
            attrs = {
                "tokens_per_expert": tpe,
                "num_local_experts": int(r["num_local_experts"]),
                "hidden": int(r["hidden_size"]),
                "intermediate": int(r["intermediate_size"]),
                "layout": "masked" if phase == "decode" else "contiguous",
            }
            key = set(attrs) - {"tokens_per_expert"}
            assert us(cost, "moe_up", attrs, key, "fp8") == pytest.approx(float(r["up_proj_us"]))
            assert us(cost, "moe_down", attrs, key, "fp8") == pytest.approx(
                float(r["down_proj_us"])
            )


@needs_csvs
def test_rebuilding_reproduces_the_committed_profiles(tmp_path: Path) -> None:
    assert published.main(["--out", str(tmp_path), "--csv-dir", str(CSV_DIR)]) == 0
    for path in sorted(tmp_path.glob("*.json")):
        committed = CATALOG_DIR / "profiles" / path.name
        assert json.loads(path.read_text()) == json.loads(committed.read_text()), path.name


def test_every_table_names_its_source() -> None:
    for name in ("h800-published", "h20-published"):
        for table in load_profile(name).tables:
            assert table.source.startswith(
                ("alibaba/InferSim@", "deepseek-ai/DeepEP", fig.FLASHMLA_H100_RUN)
            )
    for factor in load_profile("h200-roofline").roofline.__dict__.values():
        assert "h800-published" in factor.source


def test_staircase_is_covered_by_full_grids() -> None:
    stair = [(b, k) for b, ks in ((1, 4), (16, 4), (128, 3), (512, 2)) for k in range(ks)]
    grids = full_grids([(float(b), float(k)) for b, k in stair])
    assert {p for g in grids for p in g} == {(float(b), float(k)) for b, k in stair}
    for g in grids:
        firsts, seconds = {p[0] for p in g}, {p[1] for p in g}
        assert len(g) == len(firsts) * len(seconds)
    assert len(grids) == 3
