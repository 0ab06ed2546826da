"""gridmath: list-of-lists matrices."""

from gridmath.build import from_rows, full, identity, shape, zeros
from gridmath.ops import add, matmul, scale, transpose

__all__ = ["add", "from_rows", "full", "identity", "matmul", "scale", "shape", "transpose", "zeros"]
