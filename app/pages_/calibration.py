"""Calibration page: a profile's measured kernel curves against the roofline, and its crossover.

A profile is bundled (by name) or uploaded (JSON). Each point's roofline time comes from the
point's own FLOPs and bytes and the datasheet of the GPU the profile names.
"""

from __future__ import annotations

import json
from typing import Any

import streamlit as st

from app import charts, components
from sim.api import (
    CatalogError,
    gpu_names,
    load_gpu,
    load_profile,
    mla,
    parse_profile,
    profile_names,
    roofline_seconds,
)
from sim.specs import GpuSpec
from sim.specs.profile import COMM_OPS, OpTable, Profile

UPLOAD = "upload a profile (.json)"
DEFAULT_PROFILE = "h800-published"  # FlashMLA, DeepGEMM and DeepEP figures on DeepSeek's GPU


def roofline_us(table: OpTable, gpu: GpuSpec) -> list[float]:
    """Ideal latency of every point of a table on `gpu` (comm ops: bytes over the link)."""
    if table.op in COMM_OPS:
        bw = table.link_bytes_per_s or gpu.nvlink_gb_s * 1e9
        return [p.hbm_bytes / bw * 1e6 for p in table.points]
    return [roofline_seconds(gpu, p.flops, p.hbm_bytes, table.dtype) * 1e6 for p in table.points]


def table_label(i: int, t: OpTable) -> str:
    """'#3 s_q=1, heads=128 · batch 7 x kv_len 3 · flash_mla · 128-512-64.csv'."""
    key = ", ".join(f"{k}={v}" for k, v in t.key.items())
    grid = " x ".join(f"{a} {len(v)}" for a, v in t.axes.items())
    return f"#{i} {key} · {grid} · {t.impl} · {t.source.rsplit('/', 1)[-1]}"


def curve(
    table: OpTable, x_axis: str, fixed: dict[str, float], gpu: GpuSpec
) -> dict[str, list[Any]]:
    """Points of `table` along `x_axis` with the other axes held at `fixed`, sorted by x."""
    ideal = roofline_us(table, gpu)
    rows = [
        (p.at[x_axis], p.latency_us_p50, r, p.latency_us_p10, p.latency_us_p90)
        for p, r in zip(table.points, ideal, strict=True)
        if all(p.at[a] == v for a, v in fixed.items())
    ]
    rows.sort()
    names = ("x", "measured", "roofline", "p10", "p90")
    return {n: [r[i] for r in rows] for i, n in enumerate(names)}


def _pick_profile() -> Profile | None:
    names = profile_names()
    options = [*names, UPLOAD]
    default = names.index(DEFAULT_PROFILE) if DEFAULT_PROFILE in names else 0
    choice = st.selectbox("profile", options, index=default, key="cal_profile")
    if choice != UPLOAD:
        return load_profile(choice)
    upload = st.file_uploader("profile JSON", type=["json"], key="cal_upload")
    if upload is None:
        st.info("Upload a profile written by `python -m kernels_calib`.")
        return None
    try:
        return parse_profile(json.loads(upload.getvalue()), upload.name)
    except (json.JSONDecodeError, UnicodeDecodeError, CatalogError) as exc:
        components.show_error(exc, f"{upload.name} is not a usable profile:")
        return None


def _profile_gpu(profile: Profile) -> GpuSpec:
    """The GPU whose datasheet the points are compared with: the profile's own unless the user
    picks another (keyed by profile, so switching profiles resets it), with a warning then."""
    names = gpu_names()
    own = profile.device.gpu
    choice = st.selectbox(
        "roofline of GPU",
        names,
        index=names.index(own if own in names else "h200"),
        key=f"cal_gpu_{profile.name}",
        help="Datasheet the measured points are compared with.",
    )
    if own is None:
        st.caption(f"{profile.name} names no catalog GPU: pick the one it was measured on.")
    elif choice != own:
        st.warning(
            f"{profile.name} was measured on {profile.device.name} ({own}); its points are "
            f"compared with the {choice} datasheet, so the fractions of roofline below say how "
            f"the {own} kernels fare against a {choice}, not how well they use their own GPU."
        )
    return load_gpu(choice)


def _section_tables(profile: Profile, gpu: GpuSpec) -> None:
    st.subheader("Measured kernels vs roofline")
    if not profile.tables:
        st.info(f"{profile.name} has no measured tables: every op runs on the roofline factors.")
        return
    c1, c2 = st.columns([1, 3])
    ops = sorted({t.op for t in profile.tables})
    op = c1.selectbox("op", ops, index=ops.index("mla_decode") if "mla_decode" in ops else 0,
                      key="cal_op")  # fmt: skip
    tables = {table_label(i, t): t for i, t in enumerate(profile.tables) if t.op == op}
    table = tables[c2.selectbox("table", list(tables), key="cal_table")]
    axes = list(table.axes)
    x_axis = st.selectbox("x axis", axes, key="cal_x")
    fixed: dict[str, float] = {}
    others = [a for a in axes if a != x_axis]
    for col, a in zip(st.columns(max(len(others), 1)), others, strict=False):
        fixed[a] = col.select_slider(a, table.axes[a], key=f"cal_fix_{a}")
    c = curve(table, x_axis, fixed, gpu)
    st.plotly_chart(
        charts.measured_vs_roofline(
            c["x"],
            c["measured"],
            c["roofline"],
            x_label=x_axis,
            p10=c["p10"],
            p90=c["p90"],
            title=f"{table.op} ({table.impl}, {table.dtype}) on {profile.device.name}",
        ),
        key="cal_fig_table",
    )
    eff = [r / m for r, m in zip(c["roofline"], c["measured"], strict=True)]
    cols = st.columns(3)
    cols[0].metric("points on this curve", len(c["x"]))
    cols[1].metric("best fraction of roofline", f"{max(eff):.0%}" if eff else "-")
    cols[2].metric("worst fraction of roofline", f"{min(eff):.0%}" if eff else "-")
    st.caption(f"source: {table.source}")


STATUS = {"absorb_faster": "absorb faster throughout", "expand_faster": "expand faster throughout"}


def crossover_rows(profile: Profile) -> list[dict[str, Any]]:
    """Per measured prefix: the measured crossover (or which path won) beside the FLOPs q*."""
    shape = profile.model_shape
    rows = []
    for cp in profile.crossover:
        k = max(cp.prefix_len_tokens, 1)
        analytic = float(mla.crossover_q(shape.mla_spec(), k)) if shape else float("nan")
        measured = cp.crossover_new_tokens
        rows.append({
            "prefix tokens": cp.prefix_len_tokens,
            "measured crossover": STATUS.get(cp.status) if measured is None else f"{measured:,.0f}",
            "FLOPs crossover q*": round(analytic, 1),
        })  # fmt: skip
    return rows


def _section_crossover(profile: Profile) -> None:
    st.subheader("Measured absorb vs expand crossover")
    if not profile.crossover:
        st.info(f"{profile.name} holds no crossover measurement.")
        return
    rows = crossover_rows(profile)
    st.dataframe(rows, hide_index=True, key="cal_cross_table")
    prefixes = [cp.prefix_len_tokens for cp in profile.crossover]
    i = prefixes.index(st.selectbox("prefix", prefixes, key="cal_prefix"))
    cp, row = profile.crossover[i], rows[i]
    st.metric(
        "measured crossover (new tokens)",
        row["measured crossover"],
        help="The seed articles' FLOPs-only figure is about 171 for long prefixes.",
    )
    st.plotly_chart(
        charts.crossover_curves(
            cp.new_tokens, cp.absorb_us, cp.expand_us, prefix_tokens=cp.prefix_len_tokens,
            measured=cp.crossover_new_tokens, analytic=float(row["FLOPs crossover q*"]),
        ),
        key="cal_fig_cross",
    )  # fmt: skip


FLAGS = ("FAILED", "not timed", "raised", "stopped", "not run")  # notes a user must see


def notes_table(profile: Profile) -> list[dict[str, str]]:
    """The profile's notes, flagged ones (failed checks, untimed points, stops) first."""
    flagged = [n for n in profile.notes if any(f in n for f in FLAGS)]
    rest = [n for n in profile.notes if n not in flagged]
    return [{"": "!" if n in flagged else "", "note": n} for n in flagged + rest]


def _section_notes(profile: Profile) -> None:
    rows = notes_table(profile)
    if not rows:
        return
    flagged = sum(1 for r in rows if r[""])
    label = f"Run notes: {len(rows)}" + (f", {flagged} flagged" if flagged else "")
    with st.expander(label, expanded=flagged > 0):
        st.caption(
            "What the run checked, which kernel timed each family and why, and what it could "
            "not measure (flagged first)."
        )
        st.dataframe(rows, hide_index=True, key="cal_notes")


def render() -> None:
    st.title("Calibration")
    try:
        profile = _pick_profile()
    except (CatalogError, ValueError) as exc:
        components.show_error(exc, "Cannot load this profile:")
        return
    if profile is None:
        return
    st.caption(f"{profile.name} · {profile.kind} · {profile.device.name} · {profile.description}")
    gpu = _profile_gpu(profile)
    f = profile.roofline
    st.dataframe(
        [
            {"factor": n, "value": getattr(f, n).value, "source": getattr(f, n).source}
            for n in type(f).model_fields
        ],
        hide_index=True,
        key="cal_factors",
    )
    _section_tables(profile, gpu)
    _section_crossover(profile)
    _section_notes(profile)
