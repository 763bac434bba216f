"""Sweeps and capacity search over scenarios, run through a backend (serial, process pool, Ray).

- `grid`: the cartesian product of `--set` override axes (`sim.io.overrides`); `sweep`: run it,
  one row per point x deployment.
- `backends`: the executors, one interface (`run` yields (index, results JSON) as they finish).
- `load`: throughput against offered load (the app's load sweep).
- `capacity`: highest rate within the SLO per deployment; replicas and GPUs for a target rate.
- `pd_capacity`: a PD deployment's prefill and decode pools searched alone; units of each.
"""
