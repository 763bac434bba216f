"""The pure cost model: FLOPs, bytes, memory and step times. numpy only; no simpy, no I/O."""
