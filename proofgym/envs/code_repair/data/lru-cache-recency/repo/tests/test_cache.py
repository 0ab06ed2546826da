import pytest

from cachekit import LRUCache, memoize


def test_get_and_put():
    cache = LRUCache(2)
    cache.put("a", 1)
    assert cache.get("a") == 1
    assert cache.get("missing", "dflt") == "dflt"
    assert "a" in cache and len(cache) == 1


def test_capacity_is_respected():
    cache = LRUCache(2)
    for i in range(5):
        cache.put(i, i)
    assert len(cache) == 2
    assert cache.evictions == 3


def test_capacity_must_be_positive():
    with pytest.raises(ValueError):
        LRUCache(0)


def test_stored_none_is_not_a_miss():
    cache = LRUCache(1)
    cache.put("k", None)
    assert cache.get("k", "dflt") is None


def test_memoize_counts_hits():
    calls = []

    @memoize(maxsize=4)
    def square(x):
        calls.append(x)
        return x * x

    assert [square(2), square(2), square(3)] == [4, 4, 9]
    assert calls == [2, 3]
    assert square.cache_info() == {"hits": 1, "misses": 2, "size": 2}


def test_recently_read_entry_survives_eviction():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.get("a")
    cache.put("c", 3)
    assert "a" in cache
    assert "b" not in cache
