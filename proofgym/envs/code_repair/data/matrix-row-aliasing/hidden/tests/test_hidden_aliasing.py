# PROOFGYM-CANARY matrix-row-aliasing 7f3c9b2e
from gridmath import full, identity, matmul, transpose, zeros


def test_identity():
    assert identity(3) == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]


def test_full_rows_are_independent():
    m = full(3, 2, "-")
    m[1][1] = "x"
    assert m == [["-", "-"], ["-", "x"], ["-", "-"]]
    assert len({id(row) for row in m}) == 3


def test_matmul_square():
    a = [[1, 2], [3, 4]]
    b = [[5, 6], [7, 8]]
    assert matmul(a, b) == [[19, 22], [43, 50]]


def test_matmul_by_identity():
    a = [[2, -1, 0], [1, 3, 5]]
    assert matmul(a, identity(3)) == a
    assert matmul(identity(2), a) == a


def test_gram_matrix():
    a = [[1, 2], [3, 4], [5, 6]]
    assert matmul(transpose(a), a) == [[35, 44], [44, 56]]


def test_two_zero_matrices_are_independent():
    a, b = zeros(2, 2), zeros(2, 2)
    a[1][0] = 5
    assert b == [[0, 0], [0, 0]]
    assert a == [[0, 0], [5, 0]]
