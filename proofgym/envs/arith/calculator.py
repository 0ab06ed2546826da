"""An exact calculator tool: rational arithmetic over a parsed expression, never ``eval``."""

from __future__ import annotations

import ast
import operator
from fractions import Fraction

from proofgym.tools import ToolError, tool

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv}
_MAX_EXPONENT = 64
_MAX_DIGITS = 200


def evaluate(expression: str) -> Fraction:
    """Exactly evaluate ``+ - * / **`` and parentheses over integers and decimals."""
    if len(expression) > 500:
        raise ToolError("expression too long (at most 500 characters)", "invalid_arguments")
    try:
        tree = ast.parse(expression.replace("^", "**"), mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"cannot parse {expression!r}: {exc.msg}", "invalid_arguments") from None
    return _eval(tree.body)


def _eval(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool):
        return Fraction(str(node.value))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _eval(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            if right.denominator != 1 or abs(right) > _MAX_EXPONENT:
                raise ToolError(f"exponents must be integers with |n| <= {_MAX_EXPONENT}")
            result = left ** int(right)
        elif type(node.op) in _BINARY:
            if isinstance(node.op, ast.Div) and right == 0:
                raise ToolError("division by zero")
            result = _BINARY[type(node.op)](left, right)
        else:
            raise ToolError(f"operator {type(node.op).__name__} is not supported; use + - * / ^")
        if len(str(result.numerator)) + len(str(result.denominator)) > _MAX_DIGITS:
            raise ToolError("result too large")
        return result
    raise ToolError(
        f"unsupported syntax {type(node).__name__}: only numbers, + - * / ^ and parentheses",
        "invalid_arguments",
    )


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression exactly.

    Supports + - * / ^ (integer powers) and parentheses over integers and decimals. Results are
    exact fractions, with a decimal approximation when not whole.

    Args:
        expression: The expression to evaluate, for example "(12 - 4) * 3 / 5".
    """
    value = evaluate(expression)
    if value.denominator == 1:
        return str(value.numerator)
    return f"{value.numerator}/{value.denominator} (≈ {float(value):.6g})"
