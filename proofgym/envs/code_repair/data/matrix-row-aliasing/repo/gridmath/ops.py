"""Arithmetic on matrices; every operation returns a new matrix."""

from gridmath.build import shape, zeros


def add(a, b):
    if shape(a) != shape(b):
        raise ValueError(f"cannot add a {shape(a)} matrix to a {shape(b)} matrix")
    return [[x + y for x, y in zip(ra, rb)] for ra, rb in zip(a, b)]


def scale(matrix, factor):
    return [[x * factor for x in row] for row in matrix]


def transpose(matrix):
    rows, cols = shape(matrix)
    return [[matrix[r][c] for r in range(rows)] for c in range(cols)]


def matmul(a, b):
    (n, m), (m2, p) = shape(a), shape(b)
    if m != m2:
        raise ValueError(f"cannot multiply a {n}x{m} matrix by a {m2}x{p} matrix")
    result = zeros(n, p)
    for i in range(n):
        for j in range(p):
            for k in range(m):
                result[i][j] += a[i][k] * b[k][j]
    return result
