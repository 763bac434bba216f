"""Entry point: `streamlit run app/streamlit_app.py` (or `make app`, `mlasim app`).

A sidebar radio picks the page; `?page=physics` in the URL opens a page directly.

Worker processes (started with 'spawn') import this file as `__mp_main__`; everything but the
path set-up therefore lives in `main()`, which runs only as `__main__`.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `streamlit run` puts app/ on the path, not the project root
    sys.path.insert(0, str(ROOT))


LOOPBACK = ("127.0.0.1", "localhost", "::1")
SAFE_OPTIONS = {"client.showErrorDetails": "none"}


def main() -> None:
    import streamlit as st

    from app.pages_ import calibration, physics, plan, scenarios, whatif
    from app.state import keep_inputs

    keep_inputs(st.session_state)  # inputs of pages not shown this run survive the switch
    pages = {
        "What-if": whatif.render,
        "Plan": plan.render,
        "Physics": physics.render,
        "Calibration": calibration.render,
        "Scenarios": scenarios.render,
    }
    st.set_page_config(page_title="mlasim", layout="wide")
    address = str(st.get_option("server.address") or "")
    if address not in LOOPBACK:  # `streamlit run` from another folder misses .streamlit/
        st.error(
            f"mlasim's app serves this machine only, but it was started on address "
            f"{address or 'all interfaces'!r}: start it with `mlasim app`, or add "
            "`--server.address 127.0.0.1` to `streamlit run`"
        )
        st.stop()
    for option, value in SAFE_OPTIONS.items():  # settable at run time: no tracebacks shown
        st.set_option(option, value)
    names = list(pages)
    wanted = str(st.query_params.get("page", "")).lower().replace("-", "")
    start = next((i for i, n in enumerate(names) if n.lower().replace("-", "") == wanted), 0)
    st.sidebar.title("mlasim")
    page = st.sidebar.radio("page", names, index=start, key="page")
    st.sidebar.caption("Discrete-event simulator of MLA + MoE serving on GPU clusters.")
    pages[page]()


if __name__ == "__main__":
    main()
