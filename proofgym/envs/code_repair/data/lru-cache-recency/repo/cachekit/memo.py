"""Memoising functions with an LRU cache."""

import functools

from cachekit.lru import LRUCache

_MISSING = object()


def memoize(maxsize=128):
    """Cache a function's results by its positional arguments, keeping ``maxsize`` of them."""

    def decorate(func):
        cache = LRUCache(maxsize)
        stats = {"hits": 0, "misses": 0}

        @functools.wraps(func)
        def wrapper(*args):
            result = cache.get(args, _MISSING)
            if result is _MISSING:
                stats["misses"] += 1
                result = func(*args)
                cache.put(args, result)
            else:
                stats["hits"] += 1
            return result

        wrapper.cache = cache
        wrapper.cache_info = lambda: dict(stats, size=len(cache))
        return wrapper

    return decorate
