"""`bench/bench_engine.py --repeat`: the fastest of a case's repeats; repeats must agree."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.builders import bench_script


def _bench() -> ModuleType:
    return bench_script("bench_engine")


def _run(b: ModuleType, cpu_s: float, steps: int = 100, digest: str = "d1") -> object:
    return b.CaseResult(
        name="decode", summary={"steps": steps, "digest": digest}, cpu_s=cpu_s, cost_cpu_s=0.0,
        wall_s=cpu_s, steps=steps, events=steps, request_steps=steps, batch_per_rank=1.0,
        later_us_per_step=cpu_s / steps * 1e6,
    )  # fmt: skip


def test_fastest_is_the_least_cpu_and_spread_reports_the_range() -> None:
    b = _bench()
    runs = [_run(b, 0.9), _run(b, 0.5), _run(b, 0.7)]
    assert b.fastest(runs) is runs[1]
    # 5,000 / 7,000 / 9,000 us per step over 100 steps
    assert b.spread(runs) == "; 3 runs 5,000-9,000 us per step, median 7,000"
    assert b.spread(runs[:2]) == "; 2 runs 5,000-9,000 us per step, median 7,000"
    assert b.spread(runs[:1]) == ""


def test_repeats_that_simulate_differently_stop_the_bench() -> None:
    b = _bench()
    with pytest.raises(SystemExit, match="digest"):
        b.fastest([_run(b, 0.5), _run(b, 0.4, digest="d2")])


def test_later_half_is_the_cpu_from_the_middle_step_to_the_last() -> None:
    """Steps priced at CPU clock 0, 10, 11, 12, 13 s: the later half runs from step 2 (11 s) to
    step 4 (13 s), 2 s over 2 steps; the cold first steps and what follows the last are out."""
    b = _bench()

    class Fixed:
        def step_cost(self, batch: object) -> object:
            return batch

    timed = b.TimedCost(Fixed())
    timed.marks = [0.0, 10.0, 11.0, 12.0, 13.0]
    assert timed.later_half_us_per_step() == pytest.approx(1e6)
    timed.marks = [5.0]
    assert timed.later_half_us_per_step() == 0.0  # one step: no later half to time
    timed.marks = []
    timed.step_cost(None)
    timed.step_cost(None)
    assert len(timed.marks) == 2 and timed.marks[0] <= timed.marks[1]


def test_callgrind_marks_fall_where_the_later_half_is_timed() -> None:
    """`--instructions` counts a case's later half between two marks: made before pricing the
    middle step and the last one, the steps whose CPU clocks `later_half_us_per_step` reads."""
    b = _bench()

    class Fixed:
        def step_cost(self, batch: object) -> object:
            return batch

    def marked(steps: int) -> tuple[list[int], object]:
        """The steps priced before each mark of a run of `steps` steps, and its wrapper."""
        priced: list[int] = []
        timed = b.TimedCost(Fixed(), frozenset(b.TimedCost.later_half(steps)), lambda: None)
        timed.mark = lambda: priced.append(len(timed.marks))
        for _ in range(steps):
            timed.step_cost(None)
        return priced, timed

    for steps in (3, 4, 790):
        priced, timed = marked(steps)
        assert priced == [steps // 2, steps - 1]
        timed.marks = [float(i) ** 2 for i in range(steps)]  # a clock that speeds up
        half, last = priced
        want = (last**2 - half**2) / (last - half) * 1e6
        assert timed.later_half_us_per_step() == pytest.approx(want)


def test_the_decode_hour_is_counted_over_its_last_steps_the_others_over_their_later_half() -> None:
    b = _bench()
    n = b.DECODE_COUNTED_STEPS
    assert b.counted_steps("colocated", 790) == b.TimedCost.later_half(790) == (395, 789)
    assert b.counted_steps("decode_short", 6302) == (3151, 6301)
    assert b.counted_steps("decode", 32397) == (32396 - n, 32396)
    assert b.counted_steps("decode", 1500) == (750, 1499)  # never before its later half
