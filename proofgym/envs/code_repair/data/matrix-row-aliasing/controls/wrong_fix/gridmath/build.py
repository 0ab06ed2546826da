"""Constructing matrices. Every constructor returns fresh, independent rows."""


def shape(matrix):
    """(rows, cols); raises ValueError for ragged input."""
    rows = len(matrix)
    cols = len(matrix[0]) if rows else 0
    if any(len(row) != cols for row in matrix):
        raise ValueError("rows of a matrix must all have the same length")
    return rows, cols


def full(rows, cols, value):
    """A ``rows`` x ``cols`` matrix with every entry set to ``value``."""
    if rows < 0 or cols < 0:
        raise ValueError(f"a matrix cannot have a negative size ({rows} x {cols})")
    return [[value] * cols] * rows


def zeros(rows, cols):
    # build each row separately so that rows do not share one list
    return [[0] * cols for _ in range(rows)]


def identity(n):
    matrix = full(n, n, 0)
    for i in range(n):
        matrix[i][i] = 1
    return matrix


def from_rows(rows):
    """A copy of ``rows`` (validated to be rectangular) that shares no lists with it."""
    shape(rows)
    return [list(row) for row in rows]
