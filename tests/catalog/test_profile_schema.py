"""Profile schema and catalog: versions, grids, names, model-shape refusal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from sim.catalog import CatalogError, load_model
from sim.catalog.profiles import load_profile, profile_names
from sim.cost.calibrated import check_model
from sim.specs.model import MlaSpec
from sim.specs.profile import OpPoint, OpTable

SHIPPED = [
    "b200-roofline",
    "b200-sglang",
    "b200-trtllm",
    "h100-roofline",
    "h100-sglang",
    "h20-published",
    "h20-roofline",
    "h200-measured",
    "h200-roofline",
    "h200-sglang",
    "h200-trtllm",
    "h200-vllm",
    "h800-published",
    "h800-roofline",
]
ENGINES = ("sglang", "trtllm", "vllm")


def test_bundled_profiles_are_listed_and_load() -> None:
    assert profile_names() == SHIPPED
    for name in SHIPPED:
        profile = load_profile(name)
        suffix = name.split("-")[1]
        assert profile.name == name
        # production-kernel profiles are named by engine; they are published tables
        assert profile.kind == ("published" if suffix in ENGINES else suffix)
        assert profile.engine == (suffix if suffix in ENGINES else None)
        assert (profile.kind == "roofline") == (not profile.tables)


def test_unknown_name_lists_known_profiles() -> None:
    with pytest.raises(CatalogError, match="h800-published"):
        load_profile("h999-measured")


def test_newer_schema_version_is_refused_with_supported_versions(tmp_path: Path) -> None:
    data = json.loads(load_profile("h800-roofline").model_dump_json())
    data["schema_version"] = 3
    path = tmp_path / "future.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CatalogError, match=r"schema_version 3 is not supported.*version\(s\) 1, 2"):
        load_profile(str(path))


def test_older_schema_version_is_refused_naming_the_file(tmp_path: Path) -> None:
    data = json.loads(load_profile("h800-roofline").model_dump_json())
    data["schema_version"] = 0
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CatalogError, match=r"old\.json: profile schema_version 0 is not supported"):
        load_profile(str(path))


def test_version_1_file_reads_as_version_2_without_the_new_fields() -> None:
    profile = load_profile("h200-measured")  # written by kernels_calib before version 2
    assert profile.schema_version == 1 and profile.engine is None and not profile.provenance
    assert all(t.kernel_source is None for t in profile.tables)


def test_file_without_version_is_not_a_profile(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"name": "x"}))
    with pytest.raises(CatalogError, match="no 'schema_version'"):
        load_profile(str(path))


def _point(batch: float, kv: float) -> OpPoint:
    return OpPoint(at={"batch": batch, "kv_len": kv}, latency_us_p50=10.0, flops=1e9, hbm_bytes=1e6)


def test_table_must_be_a_full_grid() -> None:
    key = {"s_q": 1, "kv_dtype": "bf16", "heads": 128}
    axes = {"batch": [1.0, 2.0], "kv_len": [1024.0, 2048.0]}
    points = [_point(1, 1024), _point(1, 2048), _point(2, 1024)]
    with pytest.raises(ValidationError, match="split it into full grids"):
        OpTable(
            op="mla_decode",
            key=key,
            axes=axes,
            points=points,
            dtype="bf16",
            impl="x",
            source="test",
        )


def test_table_must_describe_every_attribute() -> None:
    with pytest.raises(ValidationError, match=r"missing \['heads'\]"):
        OpTable(
            op="mla_decode",
            key={"s_q": 1, "kv_dtype": "bf16"},
            axes={"batch": [1.0], "kv_len": [1024.0]},
            points=[_point(1, 1024)],
            dtype="bf16",
            impl="x",
            source="test",
        )


def test_point_rates_must_match_latency() -> None:
    with pytest.raises(ValidationError, match="achieved_tflop_s"):
        OpPoint(
            at={"m": 1.0},
            latency_us_p50=10.0,
            flops=1e9,
            hbm_bytes=1e6,
            achieved_tflop_s=5.0,
            achieved_gb_s=0.1,
        )


def test_check_model_accepts_other_head_counts_and_refuses_other_shapes() -> None:
    profile = load_profile("h800-published")
    check_model(profile, load_model("deepseek-v3"))
    check_model(profile, load_model("kimi-k2"))  # 64 heads, same per-head shape
    check_model(profile, load_model("qwen3-235b-a22b"))  # GQA: no MLA table applies
    v3 = load_model("deepseek-v3")
    other = v3.model_copy(
        update={
            "name": "narrow",
            "mla": MlaSpec(
                q_lora_rank=1536,
                kv_lora_rank=256,
                qk_nope_head_dim=128,
                qk_rope_head_dim=64,
                v_head_dim=128,
            ),
        }
    )
    with pytest.raises(ValueError, match=r"kv_lora_rank 512 vs 256.*python -m kernels_calib"):
        check_model(profile, other)
    check_model(load_profile("h200-roofline"), other)  # no tables: fits any model
