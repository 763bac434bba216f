import pytest

from sim.specs.deployment import Deployment, PdDeployment
from sim.validate import mapping as mp
from sim.validate.rows import read_rows


def _map(row_csv, **over):
    [r], _ = read_rows(row_csv(over))
    return mp.map_row(r)


def test_r1_agg_tp8_ep8_is_deepseek_v3_on_one_h200_node(row_csv) -> None:
    m = _map(row_csv)
    assert isinstance(m, mp.Mapped)
    sc = m.scenario
    [d] = sc.deployments
    assert isinstance(d, Deployment)
    assert (sc.model, sc.gpu, m.gpus, m.profile) == ("deepseek-v3", "h200", 8, "h200-trtllm")
    assert (d.engine, d.attn_tp, d.attn_dp, d.ep, d.moe_tp) == ("trtllm", 8, 1, 8, 1)
    assert (d.weight_dtype, d.kv_dtype, d.max_running_requests) == ("fp8", "fp8", 8)
    w = sc.workload  # aiconfigurator's runner: 10N measured, N in flight (warm-up: a no-op)
    assert w.kind == "benchmark"
    assert (w.max_concurrency, w.warmup_requests, w.num_prompts) == (8, 0, 80)
    assert (w.input_tokens, w.output_tokens, w.range_ratio) == (1024, 64, 1.0)


def test_disagg_workers_are_pool_replicas(row_csv) -> None:
    m = _map(
        row_csv,
        mode="disagg",
        tp_size="",
        attention_dp_size="",
        moe_tp_size="",
        moe_ep_size="",
        prefill_batch_size=1,
        prefill_num_workers=2,
        prefill_tp_size=1,
        prefill_attention_dp_size=8,
        prefill_moe_tp_size=1,
        prefill_moe_ep_size=8,
        decode_batch_size=32,
        decode_num_workers=3,
        decode_tp_size=8,
        decode_attention_dp_size=1,
        decode_moe_tp_size=1,
        decode_moe_ep_size=8,
    )
    assert isinstance(m, mp.Mapped)
    [d] = m.scenario.deployments
    assert isinstance(d, PdDeployment)
    assert (d.prefill.replicas, d.prefill.attn_dp, d.decode.replicas, d.decode.attn_tp) == (
        2,
        8,
        3,
        8,
    )
    assert m.gpus == 40


@pytest.mark.parametrize(
    ("over", "reason"),
    [
        ({"system": "gb200"}, mp.UNKNOWN_SYSTEM),
        ({"backend": "tgi"}, mp.UNKNOWN_ENGINE),
        ({"model_path": "Qwen/Qwen3-32B"}, mp.UNKNOWN_MODEL),
        ({"precision": "fp4", "moe_quant_mode": "nvfp4"}, mp.PRECISION),
        ({"pp_size": 2}, mp.PIPELINE),
        ({"tp_size": 64, "moe_tp_size": 8, "moe_ep_size": 8}, mp.AMBIGUOUS),
        ({"tp_size": 4, "moe_ep_size": 8}, mp.LAYOUT),
        ({"mode": "disagg", "prefill_tp_size": 8, "decode_tp_size": 8}, mp.NO_WORKERS),
    ],
)
def test_rows_it_cannot_express_get_a_reason(row_csv, over, reason) -> None:
    m = _map(row_csv, **over)
    assert isinstance(m, mp.Uncovered) and m.reason == reason, m


def test_a_repeated_measurement_is_a_duplicate_of_the_first(row_csv) -> None:
    rows, _ = read_rows(
        row_csv({}, {"id": "r2", "tp_size": 1, "attention_dp_size": 8}, {"id": "r3"})
    )
    assert mp.duplicates(rows) == {"r2": "r1", "r3": "r1"}
    assert mp.map_row(rows[2], "r1").reason == mp.DUPLICATE  # type: ignore[union-attr]


def test_a_row_names_the_profile_its_engine_runs_on() -> None:
    """Rows are priced by their engine's production-kernel profile where one is bundled, and
    the report says so (not the GPU's roofline)."""
    from sim.validate.mapping import Mapped, map_row
    from sim.validate.rows import read_rows
    from sim.validate.select import dataset_path

    good, _ = read_rows(dataset_path("aic"))
    rows = [r for r in good if r.system == "h200_sxm" and r.mode == "agg"]
    seen = {}
    for r in rows:
        m = map_row(r)
        if isinstance(m, Mapped):
            seen[r.backend] = m.profile
    assert seen.get("sglang") == "h200-sglang" and seen.get("trtllm") == "h200-trtllm", seen


@pytest.mark.parametrize(
    ("backend", "kv"), [("trtllm", "fp8"), ("sglang", "bf16"), ("vllm", "bf16")]
)
def test_kv_dtype_follows_each_engines_deepseek_recipe(row_csv, backend: str, kv: str) -> None:
    """TensorRT-LLM's DeepSeek-R1 recipes set an FP8 KV cache; SGLang's and vLLM's set none."""
    m = _map(row_csv, backend=backend)
    assert isinstance(m, mp.Mapped), m
    [d] = m.scenario.deployments
    assert isinstance(d, Deployment) and d.kv_dtype == kv
