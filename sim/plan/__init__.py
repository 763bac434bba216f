"""The planner: search layouts for a model, GPUs, traffic and SLO (`sim.plan.planner`)."""
