"""Whitelisted boolean expressions over run results: the `expect:` lines of a scenario file.

An expression is parsed with `ast.parse(mode="eval")` and walked by a tiny interpreter that knows
only: numbers, names (dotted paths into the results namespace), + - * / ** % and unary -,
comparisons (chained too), and/or/not, parentheses, and calls to the functions in `FUNCTIONS`.
Nothing is ever compiled or passed to Python's `eval`; any other syntax is rejected with a message
that says what is allowed. Names must resolve to numbers (or booleans): strings, lists and nulls in
the results are reported, never operated on.

Functions: abs(x), min(a, b, ...), max(a, b, ...), rel_err(a, b) = |a - b| / |b|,
round(x[, ndigits]), log(x) (natural), sqrt(x).

`validate_claims` vets a scenario's whole `expect:` list when the file loads (syntax, whitelist,
function names and argument counts); names are resolved later, against the results.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sim.checks.namespace import FUNCTIONS, ExpectError, Namespace, format_value, resolve

__all__ = [
    "FUNCTIONS",
    "ClaimError",
    "ExpectError",
    "check",
    "evaluate",
    "explain",
    "parse",
    "sides",
    "validate_claims",
]

MAX_EXPR_CHARS = 1000  # long enough for any readable claim, short enough to bound the work
MAX_NODES = 300
MAX_ABS_EXPONENT = 64.0  # ** keeps results bounded: no 9**9**9

_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_CMPOPS: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
_ALLOWED = (
    "numbers, names (dotted paths such as tp.ttft_s.p90), + - * / ** %, comparisons "
    "(< <= > >= == !=), and/or/not, parentheses and the functions " + ", ".join(FUNCTIONS)
)


_NODE_WORDS = {
    "Subscript": "indexing (a[0])",
    "Slice": "slicing",
    "Lambda": "lambda",
    "ListComp": "a comprehension",
    "SetComp": "a comprehension",
    "DictComp": "a comprehension",
    "GeneratorExp": "a generator expression",
    "JoinedStr": "an f-string",
    "NamedExpr": "assignment (:=)",
    "IfExp": "a conditional expression (x if c else y)",
    "List": "a list",
    "Tuple": "a tuple",
    "Dict": "a dict",
    "Set": "a set",
    "Starred": "unpacking (*x)",
    "Await": "await",
    "Yield": "yield",
}


def _reject(node: ast.AST, what: str) -> ExpectError:
    return ExpectError(f"{what} is not allowed in an expectation (column {_col(node)}); {_ALLOWED}")


def _col(node: ast.AST) -> int:
    return getattr(node, "col_offset", -1) + 1


def _dotted(node: ast.expr) -> str | None:
    """'a.b.c' for a chain of plain attribute accesses on a name; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


# '=' outside ==, <=, >=, != (and :=), with a '<' or '>' right after it ('=<' for '<=')
_BAD_EQUALS = re.compile(r"(?<![=<>!:])=([<>]?)(?!=)")


def _syntax_message(text: str, exc: SyntaxError) -> str:
    """`syntax error at column N: why: 'text'`, plus the fix when '=' was meant as '=='."""
    col = exc.offset if exc.offset and 0 < exc.offset <= len(text) else None
    msg = exc.msg
    bad = _BAD_EQUALS.search(text)
    if bad is not None:  # Python's own hints offer ':=' (not allowed here) or repeat ours
        msg = re.split(r"[.,] (?:Maybe|perhaps) you meant", msg)[0]
    out = f"syntax error {f'at column {col}' if col else 'at the end'}: {msg}: {text!r}"
    if bad is None:
        return out
    fix = bad.group(1) + "=" if bad.group(1) else "=="
    out += f"; {bad.group(0)!r} at column {bad.start() + 1} is not a comparison, write {fix!r}"
    fixed = _BAD_EQUALS.sub(lambda m: m.group(1) + "=" if m.group(1) else "==", text)
    try:
        ast.parse(fixed, mode="eval")
    except SyntaxError:
        return out  # more is wrong than the '=': no example that would not parse either
    return f"{out}: {fixed!r}"


def parse(expr: str) -> ast.Expression:
    """Parse and vet `expr` without evaluating it. Raises ExpectError naming what is not allowed."""
    if isinstance(expr, dict):  # `- a.b: 8` is a YAML mapping, not a claim
        raise ExpectError(
            f"an expectation must be a string, got the mapping {expr!r}: YAML reads 'key: value' "
            "as a mapping; write a comparison such as `tp.gpus == 8`, quoted if it holds ': '"
        )
    if not isinstance(expr, str):
        raise ExpectError(f"an expectation must be a string, got {type(expr).__name__}")
    text = " ".join(expr.split("\n")).strip()
    if not text:
        raise ExpectError("an expectation is empty; write a comparison such as `tp.gpus == 8`")
    if len(text) > MAX_EXPR_CHARS:
        raise ExpectError(f"expectation is {len(text)} characters; at most {MAX_EXPR_CHARS}")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ExpectError(_syntax_message(text, exc)) from None
    nodes = list(ast.walk(tree))
    if len(nodes) > MAX_NODES:
        raise ExpectError(f"expectation has {len(nodes)} syntax nodes; at most {MAX_NODES}")
    for node in nodes:
        _vet(node)
    return tree


def _vet(node: ast.AST) -> None:
    """Reject every node type outside the whitelist (checked on the whole tree before running)."""
    if isinstance(node, ast.Expression | ast.Load | ast.operator | ast.cmpop | ast.boolop):
        if isinstance(node, ast.operator) and type(node) not in _BINOPS:
            raise _reject(node, f"operator {type(node).__name__}")
        if isinstance(node, ast.cmpop) and type(node) not in _CMPOPS:
            raise _reject(node, f"comparison {type(node).__name__} ('is'/'in')")
        return
    if isinstance(node, ast.unaryop):
        if not isinstance(node, ast.USub | ast.UAdd | ast.Not):
            raise _reject(node, f"unary {type(node).__name__}")
        return
    if isinstance(node, ast.Constant):
        if type(node.value) not in (int, float, bool):
            raise _reject(node, f"the literal {type(node.value).__name__}")
        return
    if isinstance(node, ast.Name):
        if node.id.startswith("_"):
            raise _reject(node, f"the name {node.id!r} (leading underscore)")
        return
    if isinstance(node, ast.Attribute):
        if node.attr.startswith("_"):
            raise _reject(node, f"the attribute {node.attr!r} (leading underscore)")
        if _dotted(node) is None:
            raise _reject(node, "attribute access on anything but a dotted name")
        return
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            what = _dotted(node.func) or type(node.func).__name__
            raise ExpectError(
                f"calling {what!r} is not allowed in an expectation (column {_col(node)}); "
                f"the functions are {', '.join(FUNCTIONS)}"
            )
        kw = node.keywords[0] if node.keywords else None
        if kw is not None and kw.arg is not None:  # `abs(x = 8)` parses as a keyword argument
            raise ExpectError(
                f"{node.func.id}() takes no keyword arguments ('{kw.arg}=' at column "
                f"{_col(kw)}); to compare, write '=='"
            )
        if kw is not None or any(isinstance(a, ast.Starred) for a in node.args):
            raise _reject(node, "unpacking (*x, **x)")
        _, lo, hi = FUNCTIONS[node.func.id]
        if not lo <= len(node.args) <= hi:
            raise ExpectError(f"{node.func.id}() takes {lo}..{hi} arguments, got {len(node.args)}")
        return
    if isinstance(node, ast.BinOp | ast.UnaryOp | ast.BoolOp | ast.Compare):
        return
    raise _reject(node, _NODE_WORDS.get(type(node).__name__, type(node).__name__))


def _value(node: ast.expr, ns: Namespace) -> Any:
    """Interpret one vetted node."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name | ast.Attribute):
        return resolve(_dotted(node) or "", ns)
    if isinstance(node, ast.UnaryOp):
        v = _value(node.operand, ns)
        if isinstance(node.op, ast.Not):
            return not v
        return -v if isinstance(node.op, ast.USub) else +v
    if isinstance(node, ast.BinOp):
        return _binop(node, _value(node.left, ns), _value(node.right, ns))
    if isinstance(node, ast.BoolOp):
        is_and = isinstance(node.op, ast.And)
        for sub in node.values:  # short-circuits like Python, returns a bool
            if bool(_value(sub, ns)) != is_and:
                return not is_and
        return is_and
    if isinstance(node, ast.Compare):
        left = _value(node.left, ns)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = _value(comp, ns)
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        args = [_value(a, ns) for a in node.args]
        try:
            return FUNCTIONS[node.func.id][0](*args)
        except (ValueError, TypeError, OverflowError) as exc:
            raise ExpectError(
                f"{node.func.id}({', '.join(map(format_value, args))}): {exc}"
            ) from None
    raise _reject(node, type(node).__name__)  # unreachable after _vet


def _binop(node: ast.BinOp, a: Any, b: Any) -> Any:
    if isinstance(node.op, ast.Pow):
        if abs(b) > MAX_ABS_EXPONENT:
            raise ExpectError(f"exponent {format_value(b)} too large; |exponent| <= 64")
        a, b = float(a), float(b)  # floats keep ** bounded in time and size
    try:
        result = _BINOPS[type(node.op)](a, b)
    except ZeroDivisionError:
        raise ExpectError(f"division by zero at column {_col(node)}") from None
    except OverflowError:
        raise ExpectError(f"arithmetic overflow at column {_col(node)}") from None
    if isinstance(result, complex):
        raise ExpectError(f"complex result at column {_col(node)} (negative base to a fraction)")
    return result


def evaluate(expr: str, namespace: Namespace) -> Any:
    """Value of `expr` (a number or a bool) over `namespace`."""
    return _value(parse(expr).body, namespace)


def check(expr: str, namespace: Namespace) -> bool:
    """True when the expectation holds. Raises ExpectError if it is not a boolean expression."""
    value = evaluate(expr, namespace)
    if not isinstance(value, bool):
        raise ExpectError(
            f"{expr!r} evaluates to {format_value(value)}, not true/false; write a comparison"
        )
    return value


def explain(expr: str, namespace: Namespace) -> str:
    """`expr` with every name followed by its value: `tp.gpus (8) == 8`. Unknown names show `?`."""
    text = " ".join(expr.split("\n")).strip()
    tree = parse(text)
    raw = text.encode()
    spans: list[tuple[int, int, str]] = []
    funcs = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree.body):  # breadth first: a.b.c comes before its inner a.b and a
        if not isinstance(node, ast.Name | ast.Attribute) or id(node) in funcs:
            continue
        name = _dotted(node)
        if name is None or any(s <= node.col_offset < e for s, e, _ in spans):
            continue
        try:
            shown = format_value(resolve(name, namespace))
        except ExpectError:
            shown = "?"
        spans.append((node.col_offset, node.end_col_offset or node.col_offset, shown))
    out, pos = [], 0
    for _, end, shown in sorted(spans):
        out.append(raw[pos:end].decode())
        out.append(f" ({shown})")
        pos = end
    out.append(raw[pos:].decode())
    return "".join(out)


def sides(expr: str, namespace: Namespace) -> list[Any] | None:
    """Values of each operand of a top-level comparison (`a < b < c` -> [a, b, c]), else None."""
    body = parse(expr).body
    if not isinstance(body, ast.Compare):
        return None
    return [_value(n, namespace) for n in [body.left, *body.comparators]]


class ClaimError(ExpectError):
    """`expect:` lines that fail `parse`; `problems` holds (index in the list, message) pairs."""

    def __init__(self, problems: Sequence[tuple[int, str]]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(f"expect[{i}]: {msg}" for i, msg in self.problems))

    def __reduce__(self) -> tuple[Any, ...]:  # keeps `problems` across process pools
        return (type(self), (self.problems,))


def validate_claims(claims: Iterable[object]) -> None:
    """Vet every claim of an `expect:` list without results: syntax, whitelist, function names
    and argument counts. Raises ClaimError listing each bad line; returns None when all parse."""
    problems = []
    for i, claim in enumerate(claims):
        try:
            parse(claim)  # type: ignore[arg-type]  # parse reports a non-string itself
        except ExpectError as exc:
            problems.append((i, str(exc)))
    if problems:
        raise ClaimError(problems)
