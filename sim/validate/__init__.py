"""`mlasim validate`: the simulator against measured deployments (docs/validation.md).

`rows` reads and checks the measured CSV, `mapping` turns a row into a scenario or a coverage
reason, `workload` builds the row's benchmark, `runner` runs the rows resumably on a backend,
`stats` computes errors, ranking agreement and the CI gate, `report` writes Markdown and HTML,
`select` ties them together for the CLI and the CI test.
"""
