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
    _slow_modules_first(items)
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _slow_modules_first(items: list[pytest.Item]) -> None:
    """Modules holding a `slow` test run first, each module's tests together and in order.
    `make test` hands whole modules to its workers in this order (`--dist loadscope
    --no-loadscope-reorder`): a module's fixtures are set up once, and the long modules
    start at once instead of ending the run on one worker while the other idles."""
    slow = {item.module.__name__ for item in items if item.module and "slow" in item.keywords}
    items.sort(key=lambda item: not (item.module and item.module.__name__ in slow))
