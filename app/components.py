"""Reusable widgets: catalog pickers, spec forms generated from pydantic fields, error display.

Forms read each field's type and description from the spec class, so the widget help, the CLI
help and the JSON schema all come from one source; the spec's own validation checks the bounds.
"""

from __future__ import annotations

import hashlib
import tempfile
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import streamlit as st
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from sim.api import CatalogError, gpu_names, load_gpu, load_model, model_names
from sim.specs import GpuSpec, ModelSpec

UPLOAD = "upload config.json"


def error_text(exc: Exception) -> str:
    """One readable line per problem: the field path and pydantic's (or our) message."""
    if isinstance(exc, ValidationError):
        lines = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"])
            msg = str(err["msg"]).removeprefix("Value error, ")
            lines.append(f"{where}: {msg}" if where else msg)
        return "\n".join(lines)
    return str(exc)


MARKDOWN_MARKS = "\\`*_~$"  # what st.error would render as emphasis, code or LaTeX


def plain(text: str) -> str:
    """`text` shown as written inside Streamlit's markdown (`__import__` stays `__import__`)."""
    return "".join("\\" + c if c in MARKDOWN_MARKS else c for c in text)


def show_error(exc: Exception, what: str) -> None:
    """Report invalid input inside the page, never as a traceback."""
    st.error(f"{what}\n\n{plain(error_text(exc))}")


def model_picker(
    key: str, *, default: str = "deepseek-v3", allow_upload: bool = True
) -> tuple[str, ModelSpec] | None:
    """(name or path, spec) of a catalog model or of a HuggingFace config.json the user uploads."""
    options = model_names() + ([UPLOAD] if allow_upload else [])
    idx = options.index(default) if default in options else 0
    choice = st.selectbox(
        "model", options, index=idx, key=key, help="Catalog model or your own config.json"
    )
    if choice != UPLOAD:
        return choice, load_model(choice)
    upload = st.file_uploader("config.json", type=["json"], key=f"{key}_file")
    if upload is None:
        st.info("Upload a HuggingFace config.json to continue.")
        return None
    path = uploaded_model_path(upload.getvalue())
    try:
        return path, load_model(path)
    except (
        ValueError,
        KeyError,
        TypeError,
        CatalogError,
    ) as exc:  # ValidationError is a ValueError
        show_error(exc, f"{upload.name} is not a usable model config:")
        return None


def uploaded_model_path(data: bytes) -> str:
    """Keep an uploaded config.json on disk so a scenario (and its YAML) can name it by path."""
    folder = Path(tempfile.gettempdir()) / "mlasim-app-models"
    folder.mkdir(exist_ok=True)
    path = folder / f"{hashlib.sha256(data).hexdigest()[:16]}.json"
    if not path.exists():
        path.write_bytes(data)
    return str(path)


def gpu_picker(key: str, default: str = "h200") -> GpuSpec:
    names = gpu_names()
    choice = st.selectbox(
        "GPU",
        names,
        index=names.index(default) if default in names else 0,
        key=key,
        format_func=lambda n: f"{n} ({load_gpu(n).display_name})",
    )
    return load_gpu(choice)


def _label(name: str) -> str:
    return name.replace("_", " ")


DEFAULT_CHOICE = "default"


def _optional(tp: Any) -> tuple[Any, bool]:
    """(inner type, True) for `X | None`; (tp, False) otherwise."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def field_widget(name: str, info: FieldInfo, value: Any, key: str) -> Any:
    """One widget for one pydantic field; returns the raw value for validation by the spec."""
    tp, optional = _optional(info.annotation)
    label, help_ = _label(name), info.description
    origin = typing.get_origin(tp)
    if origin is Literal:  # fixed name lists (router, mla_policy, dtypes) are Literal types
        # an optional name (engine) offers "default" first, which leaves the field unset
        options = ([DEFAULT_CHOICE] if optional else []) + list(typing.get_args(tp))
        picked = st.selectbox(
            label,
            options,
            index=options.index(value) if value in options else 0,
            key=key,
            help=help_,
        )
        return None if picked == DEFAULT_CHOICE else picked
    if tp is bool:
        return st.checkbox(label, value=bool(value), key=key, help=help_)
    if tp in (int, float):
        # no min/max on the box: a bounded box keeps its last valid value (and a run would use
        # it) while showing the typed one; out of range, the spec's message names the field
        if optional:
            help_ = f"{help_} (0 = default)"
            value = value or 0
        cast = int if tp is int else float
        v = st.number_input(
            label,
            value=cast(value),
            step=1 if tp is int else 0.05,
            key=key,
            help=help_,
        )
        return None if optional and v == 0 else v
    if origin is tuple:
        text = st.text_input(
            label,
            ", ".join(str(v) for v in value),
            key=key,
            help=f"{help_} Comma-separated.",
            placeholder=TUPLE_HINTS.get(name, "comma-separated numbers"),
        )
        return parse_floats(text)
    return st.text_input(label, "" if value is None else str(value), key=key, help=help_)


# what an empty list box suggests (a hint, never a value the run uses)
TUPLE_HINTS = {
    "mtp_acceptance": "e.g. 0.85 (DeepSeek-V3's second token: 85-90%), or 0.8, 0.6 per draft",
}


def parse_floats(text: str) -> tuple[float, ...] | str:
    """'0.8, 0.6' -> (0.8, 0.6); anything unparsable is returned as is for the spec to reject."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    try:
        return tuple(float(p) for p in parts)
    except ValueError:
        return text


def spec_form(
    spec: type[BaseModel],
    values: Mapping[str, Any],
    key: str,
    *,
    main: list[str],
    skip: tuple[str, ...] = (),
    per_row: int = 2,
) -> dict[str, Any]:
    """Widgets for a spec's fields, `per_row` to a row: `main` shown, the rest (but `skip`) in
    an expander. Unset fields start at the spec's default."""
    fields = spec.model_fields

    def grid(names: list[str]) -> None:
        for start in range(0, len(names), per_row):
            for col, name in zip(st.columns(per_row), names[start : start + per_row], strict=False):
                with col:
                    value = values.get(name, fields[name].default)
                    out[name] = field_widget(name, fields[name], value, f"{key}.{name}")

    out: dict[str, Any] = {}
    grid(main)
    with st.expander("more settings"):
        grid([n for n in fields if n not in main and n not in skip])
    out.update({name: values[name] for name in skip if name in values})
    return out


def validated(spec: type[BaseModel], raw: Mapping[str, Any], what: str) -> BaseModel | None:
    """The spec built from `raw`, or None after showing the validation message in the page."""
    try:
        return spec.model_validate(dict(raw))
    except ValidationError as exc:
        show_error(exc, f"{what} is invalid:")
        return None
