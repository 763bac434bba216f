"""Shared fixtures; GPU tests are skipped where CUDA is absent."""

from __future__ import annotations

import signal

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Children the tests start must take SIGINT as a user's Ctrl-C (the resume tests send it).
    A shell starts a background job with SIGINT ignored, and an ignored signal stays ignored
    across exec: under `make test &` those children would never see it. A handler, unlike an
    ignore, is reset at exec, so the children start with Python's default."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _fresh_cost_models() -> None:
    """Each test starts without the cost models an earlier test's runs left kept
    (`sim.run.default_cost_factory`), so that no test prices with memos filled while another
    had something patched."""
    from sim.run import forget_cost_models

    forget_cost_models()


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
