"""Shared fixtures of the app tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _restore_main_module() -> Iterator[None]:
    """Put back `sys.modules['__main__']` after each test. Streamlit's script runner leaves the
    script it ran there, and a worker process started later with 'spawn' re-runs `__main__`'s
    file: after `AppTest.from_function` that is a deleted temporary script which raises, so the
    pool's manager failed to start (EOFError) in whichever test came next."""
    main = sys.modules.get("__main__")
    yield
    if main is not None:
        sys.modules["__main__"] = main
