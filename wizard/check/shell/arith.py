"""`$((...))` as bash computes it: signed 64-bit integers with wraparound, C division, evaluated without eval()."""

from __future__ import annotations

import ast
import re

from wizard.check.shell.model import MAX_EXPR_CHARS


def _div(a: int, b: int) -> int:
    if b == 0:
        raise ZeroDivisionError("division by 0")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _i64(v: int) -> int:
    """bash arithmetic is signed 64-bit with wraparound (intmax_t)."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >> 63 else v


def _pow(a: int, b: int) -> int:
    if b < 0:
        raise ValueError("exponent less than 0")
    return _i64(pow(a, b, 1 << 64))


_INT_OPS = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Div: _div, ast.FloorDiv: _div, ast.Mod: lambda a, b: a - b * _div(a, b), ast.Pow: _pow,
    ast.LShift: lambda a, b: a << (b & 63), ast.RShift: lambda a, b: a >> (b & 63), ast.BitAnd: lambda a, b: a & b,
    ast.BitOr: lambda a, b: a | b, ast.BitXor: lambda a, b: a ^ b,
}
_CMP_OPS = {ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
            ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b}


def _eval_int(text: str) -> int:
    """A bash integer expression (no assignments, increments or ?:), evaluated without eval()."""
    if len(text) > MAX_EXPR_CHARS:
        raise ValueError(f"arithmetic expression longer than {MAX_EXPR_CHARS} characters")
    if re.search(r"\?|(?<![=!<>])=(?!=)|\+\+|--", text):
        raise ValueError("assignment, increment or ?: is not supported")
    py = re.sub(r"!(?!=)", " not ", text.replace("&&", " and ").replace("||", " or ")).strip()
    try:
        tree = ast.parse(py or "0", mode="eval")
    except (RecursionError, MemoryError):
        raise ValueError("arithmetic nested too deeply") from None

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _INT_OPS:
            return _i64(int(_INT_OPS[type(node.op)](ev(node.left), ev(node.right))))
        if isinstance(node, ast.UnaryOp):
            v = ev(node.operand)
            ops = {ast.USub: _i64(-v), ast.UAdd: v, ast.Invert: ~v, ast.Not: int(not v)}
            if type(node.op) in ops:
                return ops[type(node.op)]
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMP_OPS:
            return int(_CMP_OPS[type(node.ops[0])](ev(node.left), ev(node.comparators[0])))
        if isinstance(node, ast.BoolOp):
            vals = [ev(v) for v in node.values]
            return int(all(vals) if isinstance(node.op, ast.And) else any(vals))
        raise ValueError("unsupported arithmetic")

    try:
        return ev(tree)
    except RecursionError:
        raise ValueError("arithmetic nested too deeply") from None

