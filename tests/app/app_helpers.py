"""AppTest helpers: open the app on a page, read its metrics and Plotly figures."""

from __future__ import annotations

import json
import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"
TIMEOUT_S = 120  # generous: the machine running the suite may be busy


def open_page(page: str) -> AppTest:
    """The app after its first run on `page` (the sidebar radio's label)."""
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S).run()
    if page != "What-if":
        at.sidebar.radio(key="page").set_value(page).run()
    assert not at.exception, at.exception
    return at


def metrics(at: AppTest) -> dict[str, str]:
    """Metric label -> shown value (the first of each label)."""
    out: dict[str, str] = {}
    for m in at.metric:
        out.setdefault(m.label, m.value)
    return out


def figures(at: AppTest) -> list[dict[str, object]]:
    """The Plotly figure specs the page drew."""
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def array(trace: dict[str, object], axis: str) -> list[float]:
    """A trace's x or y values; Plotly encodes numpy arrays as base64 typed arrays."""
    import base64

    import numpy as np

    raw = trace[axis]
    if isinstance(raw, dict):
        data = base64.b64decode(str(raw["bdata"]))
        return np.frombuffer(data, dtype=np.dtype(str(raw["dtype"]))).astype(float).tolist()
    return [float(v) for v in raw]  # type: ignore[attr-defined]


def error(at: AppTest, i: int = 0) -> str:
    """The i-th error box's text as the user reads it (the page escapes markdown marks)."""
    return re.sub(r"\\(.)", r"\1", at.error[i].value)
