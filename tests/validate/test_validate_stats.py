import pytest

from sim.validate.stats import errors, gate, headline, ranking


def rec(i, layout, meas_tpot, pred_tpot, conc=8):
    return {
        "id": i,
        "model": "m",
        "gpu": "h200",
        "gpus": 8,
        "isl": 1,
        "osl": 1,
        "concurrency": conc,
        "engine": "trtllm",
        "mode": "agg",
        "precision": "fp8",
        "layout": layout,
        "meas_ttft_ms": 100.0,
        "pred_ttft_ms": 110.0,
        "meas_tpot_ms": meas_tpot,
        "pred_tpot_ms": pred_tpot,
        "meas_tok_s_per_gpu": 1000 / meas_tpot,
        "pred_tok_s_per_gpu": 1000 / pred_tpot,
    }


def test_errors_are_mape_and_signed_bias() -> None:
    e = errors([rec("a", "x", 10.0, 12.0), rec("b", "y", 10.0, 9.0)])
    assert e["tpot_ms_mape"] == pytest.approx(15.0)
    assert e["tpot_ms_bias"] == pytest.approx(5.0)
    assert e["ttft_ms_mape"] == pytest.approx(10.0)


def test_ranking_counts_pairs_of_other_layouts_only() -> None:
    recs = [
        rec("ep", "EP8", 23.4, 30.0),
        rec("tp", "TP8", 34.0, 28.0),
        rec("tp2", "TP8", 34.0, 28.0),
        rec("other", "EP8", 20.0, 19.0, conc=64),
    ]
    r = ranking(recs, "tpot_ms")
    assert r["pairs"] == 2 and r["agreement"] == 0.0  # ep vs tp, ep vs tp2: both inverted
    assert r["inversions"][0][:2] == ("ep", "tp")


def test_gate_passes_its_own_figures_and_fails_a_lowered_baseline() -> None:
    recs = [rec("ep", "EP8", 23.4, 20.0), rec("tp", "TP8", 34.0, 30.0)]
    fig = headline(recs)
    assert gate(fig, fig) == []
    assert gate({**fig, "tpot_mape": fig["tpot_mape"] + 1.9}, fig) == []
    lowered = {**fig, "tpot_mape": fig["tpot_mape"] - 2.5}
    assert any("tpot_mape" in f for f in gate(fig, lowered))
    assert any("rank_tpot" in f for f in gate({**fig, "rank_tpot": 50.0}, fig))
