import pytest

from gridmath import add, from_rows, full, matmul, scale, shape, transpose, zeros


def test_zeros_shape():
    assert shape(zeros(2, 3)) == (2, 3)
    assert zeros(2, 3) == [[0, 0, 0], [0, 0, 0]]


def test_full_values():
    assert full(1, 2, 7) == [[7, 7]]


def test_negative_size():
    with pytest.raises(ValueError):
        full(-1, 2, 0)


def test_from_rows_copies():
    rows = [[1, 2], [3, 4]]
    copy = from_rows(rows)
    copy[0][0] = 99
    assert rows[0][0] == 1


def test_ragged_rejected():
    with pytest.raises(ValueError):
        from_rows([[1, 2], [3]])


def test_add_scale_transpose():
    a = [[1, 2], [3, 4]]
    assert add(a, a) == scale(a, 2) == [[2, 4], [6, 8]]
    assert transpose([[1, 2, 3]]) == [[1], [2], [3]]


def test_row_vector_times_column_vector():
    assert matmul([[1, 2, 3]], [[4], [5], [6]]) == [[32]]


def test_setting_one_entry_of_zeros():
    m = zeros(2, 2)
    m[0][0] = 1
    assert m == [[1, 0], [0, 0]]
