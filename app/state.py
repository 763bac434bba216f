"""Keep page inputs across page switches.

Streamlit forgets a widget's value once a run does not draw the widget (another page is shown).
Every run therefore copies the kept inputs' values into a store of their own (`STORE`), and puts
back into the session only the ones Streamlit has forgotten: a value set that way is kept until
its widget is drawn again, and that one run tells the browser to show it.

Only forgotten values are put back. Setting a key that is still there would mark its widget as
set by the app in every run, and each run would then send the browser the value the run started
with: a run already under way when a box is typed into would write its older value over the
typing. Buttons, uploads and download buttons cannot be set at all (Streamlit refuses), nor can
chart or table selections (not plain values), so only plain values under the pages' key prefixes
are kept.
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
STORE = "_kept_inputs"  # key -> the value it last had; no kept prefix, so never kept itself


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
    store: dict[str, Any] = state.setdefault(STORE, {})
    for k in kept_keys(state):
        store[k] = state[k]
    for k, value in store.items():
        if k not in state:  # its widget was not drawn last run: Streamlit forgot it
            state[k] = value


def forget_inputs(state: MutableMapping[str, Any], prefixes: tuple[str, ...]) -> None:
    """Drop for good the inputs whose keys start with `prefixes`: their widgets start again
    from their defaults."""
    store: dict[str, Any] = state.setdefault(STORE, {})
    for mapping in (store, state):
        for k in [k for k in mapping if isinstance(k, str) and k.startswith(prefixes)]:
            del mapping[k]
