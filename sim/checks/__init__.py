"""Scenario checks: the `expect:` claim language (`expect`, `namespace`, `claim_names`), cost-model
`probes`, `golden` summaries, and the `runner` that checks scenario files.

The claim language sits below `sim.io` (the scenario loader vets a file's claims and the names
they read before anything runs); `runner` sits above it, since it reads scenario files.
"""
