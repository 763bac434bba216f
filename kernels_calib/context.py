"""State of one calibration run: plan, device, random generator, collected tables and notes."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import torch

from kernels_calib.grids import make_tables
from kernels_calib.plan import Plan
from kernels_calib.timing import Timing, time_kernel
from sim.specs.gpu import GpuSpec
from sim.specs.model import MlaSpec, ModelSpec
from sim.specs.profile import CrossoverPoint, Factor, KeyValue, OpTable

K = TypeVar("K")

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
Row = tuple[tuple[float, ...], Timing | None]  # None: the point raised and was not timed


class StopCalibration(Exception):
    """Raised at the next point once the run's time limit is spent or it was asked to stop."""


@dataclass
class Ctx:
    """Everything a kernel family needs; families append tables, notes and crossover points."""

    plan: Plan
    model: ModelSpec
    gen: torch.Generator
    device_name: str
    gpu: GpuSpec | None = None  # catalog GPU this device is (None: unknown or CPU)
    progress: Callable[[str], None] = lambda label: None  # called once per planned point
    current: str = ""  # the point being measured, for messages
    tables: list[OpTable] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    crossover: list[CrossoverPoint] = field(default_factory=list)
    libraries: dict[str, str] = field(default_factory=dict)
    deadline: float | None = None  # time.perf_counter() value after which no point starts
    stop_reason: str | None = None  # set (e.g. by a signal handler) to stop at the next point
    launch: Factor | None = None  # measured per-kernel launch cost (elementwise.measure_launch)
    chosen: dict[str, object] = field(default_factory=dict)  # kernels picked once, reused later

    @property
    def device(self) -> str:
        return self.plan.device

    @property
    def mla(self) -> MlaSpec:
        return self.model.mla_spec

    @property
    def source(self) -> str:
        return f"measured by kernels_calib on {self.device_name}"

    def randn(
        self, *shape: int, dtype: torch.dtype = torch.bfloat16, std: float = 1.0
    ) -> torch.Tensor:
        """Normal random tensor on the run's device from the run's generator (never zeros)."""
        t = torch.randn(*shape, generator=self.gen, device=self.device, dtype=torch.float32)
        return (t * std).to(dtype)

    def advance(self, label: str) -> None:
        """Move to the next planned point (progress bar and messages); raise StopCalibration
        instead when the time limit is spent or a stop was requested."""
        late = self.deadline is not None and time.perf_counter() > self.deadline
        if self.stop_reason is None and late:
            self.stop_reason = "time limit spent"
        if self.stop_reason is not None:
            raise StopCalibration(f"{self.stop_reason} before {label!r}")
        self.current = label
        self.progress(label)

    def time(self, fn: Callable[[int], object], sets: int = 1) -> Timing | None:
        """Timing of `fn`, or None (noted) when the kernel raises at this point, e.g. OOM."""
        try:
            return time_kernel(fn, sets=sets, device=self.device, config=self.plan.timing)
        except RuntimeError as exc:  # torch reports OOM and unsupported shapes this way
            self.notes.append(f"{self.current}: raised {str(exc)[:200]!r}; point not timed")
            if self.device == "cuda":
                torch.cuda.empty_cache()
            return None

    def fastest(self, what: str, timed: Sequence[tuple[float, str, K]], user: str) -> K | None:
        """The fastest of `timed` (median us, impl, kernel), noted with every time ("{what}: a
        12 us, b 15 us; {user} uses a"), so a profile says what the kernels it did not use cost."""
        if not timed:
            return None
        ranked = sorted(timed, key=lambda x: x[0])
        probes = ", ".join(f"{impl} {us:.0f} us" for us, impl, _ in ranked)
        self.notes.append(f"{what}: {probes}; {user} uses {ranked[0][1]}")
        return ranked[0][2]

    def time_call(self, f: Callable[..., object], *args: object) -> Timing | None:
        """Time `f(*args)` on one input set."""
        return self.time(lambda i: f(*args))

    def time_rotating(
        self, f: Callable[..., object], inputs: Sequence[tuple[object, ...]]
    ) -> Timing | None:
        """Time `f(*inputs[i])`, rotating through the input sets."""
        return self.time(lambda i: f(*inputs[i]), sets=len(inputs))

    def add(
        self,
        op: str,
        key: Mapping[str, KeyValue],
        axis_names: Sequence[str],
        rows: Sequence[Row],
        *,
        dtype: str,
        impl: str,
        link_bytes_per_s: float | None = None,
    ) -> None:
        """Turn timed rows into op tables (split into full grids when points were skipped)."""
        timed = [(at, t) for at, t in rows if t is not None]
        if not timed:
            self.notes.append(f"{op} {dict(key)}: no point could be timed")
            return
        self.tables += make_tables(
            op=op,
            key=key,
            axis_names=axis_names,
            rows=[(at, t.p50_us) for at, t in timed],
            dtype=dtype,
            impl=impl,
            source=self.source,
            notes=self.notes,
            mla_spec=self.mla,
            spreads={at: (t.p10_us, t.p90_us) for at, t in timed},
            link_bytes_per_s=link_bytes_per_s,
        )
        graphed = sum(t.graphed for _, t in timed)
        if self.device == "cuda" and graphed < len(timed):
            self.notes.append(
                f"{op} {dict(key)} [{impl}]: {len(timed) - graphed} of {len(timed)} points timed "
                "without CUDA graphs (not capturable)"
            )
