"""Keep page inputs across page switches.

Streamlit forgets a widget's value once a run does not draw the widget (another page is shown).
Re-assigning each kept key to itself at the start of every run marks the value as set by the
app, which Streamlit keeps until the widget is drawn again. Buttons, uploads and download
buttons cannot be set that way (Streamlit refuses), nor can chart or table selections (not plain
values), so only plain values under the pages' key prefixes are kept.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

# What-if: wi_ (pickers), wl_ (workload), slo_, run_, dep<i>. (deployment cards); Plan: plan_
KEPT_PREFIXES = ("wi_", "wl_", "slo_", "run_", "dep", "plan_")
# keys of widgets whose value the app may not set: buttons, uploads, downloads
UNSETTABLE_SUFFIXES = ("_run", "_file", "_sweep", "_go")
UNSETTABLE_PARTS = ("_dl_",)
PLAIN = (bool, int, float, str)


def _plain(value: Any) -> bool:
    if isinstance(value, PLAIN):
        return True
    return isinstance(value, list | tuple) and all(isinstance(v, PLAIN) for v in value)


def kept_keys(state: MutableMapping[str, Any]) -> list[str]:
    """The widget keys whose values survive a page switch."""
    return [
        k for k in list(state)
        if isinstance(k, str) and k.startswith(KEPT_PREFIXES)
        and not k.endswith(UNSETTABLE_SUFFIXES) and not any(p in k for p in UNSETTABLE_PARTS)
        and _plain(state[k])
    ]  # fmt: skip


def keep_inputs(state: MutableMapping[str, Any]) -> None:
    """Call at the start of every run, before any widget is drawn."""
    for k in kept_keys(state):
        state[k] = state[k]
