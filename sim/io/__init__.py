"""Edges of the simulator: scenario files, results files, traces and `expect:` checks."""
