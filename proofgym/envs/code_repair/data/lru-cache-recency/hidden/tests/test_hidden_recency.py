# PROOFGYM-CANARY lru-cache-recency 7f3c9b2e
from cachekit import LRUCache, memoize


def test_overwriting_an_entry_makes_it_most_recent():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("a", 10)
    cache.put("c", 3)
    assert cache.get("a") == 10
    assert "b" not in cache
    assert cache.evictions == 1


def test_keys_are_ordered_least_to_most_recent():
    cache = LRUCache(3)
    for key in "abc":
        cache.put(key, key)
    cache.get("a")
    cache.put("b", "B")
    assert cache.keys() == ["c", "a", "b"]


def test_long_sequence_of_uses():
    cache = LRUCache(3)
    for key in "abc":
        cache.put(key, 0)
    for key in "aba":
        cache.get(key)
    cache.put("d", 0)
    assert sorted(cache.keys()) == ["a", "b", "d"]
    cache.put("c", 0)
    assert sorted(cache.keys()) == ["a", "c", "d"]


def test_memoize_keeps_hot_arguments():
    calls = []

    @memoize(maxsize=2)
    def ident(x):
        calls.append(x)
        return x

    for x in (1, 2, 1, 3, 1, 4, 1):
        ident(x)
    assert calls == [1, 2, 3, 4]
    assert ident.cache_info()["hits"] == 3


def test_missing_get_does_not_change_order():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("zzz") is None
    assert cache.keys() == ["a", "b"]
