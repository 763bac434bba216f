"""mlasim: a discrete-event simulator of GPU clusters serving MLA + MoE models."""

__version__ = "0.1.0"
