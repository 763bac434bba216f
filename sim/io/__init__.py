"""Edges of the simulator: scenario files and their `--set` overrides, results files, request
exports, traces and trace CSVs."""
