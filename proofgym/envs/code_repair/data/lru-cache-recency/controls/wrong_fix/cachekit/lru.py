"""A least-recently-used cache."""

_MISSING = object()


class LRUCache:
    """Holds at most ``capacity`` entries; when full, a new entry evicts the least recently used one.

    Reading an entry with ``get`` and writing it with ``put`` both count as using it.
    ``keys()`` lists entries from least to most recently used.
    """

    def __init__(self, capacity):
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self.evictions = 0
        self._data = {}  # dicts keep insertion order: first key = least recently used

    def get(self, key, default=None):
        value = self._data.get(key, _MISSING)
        if value is _MISSING:
            return default
        self._touch(key)
        return value

    def put(self, key, value):
        if key not in self._data and len(self._data) >= self.capacity:
            oldest = next(iter(self._data))
            del self._data[oldest]
            self.evictions += 1
        self._data[key] = value

    def _touch(self, key):
        # Re-inserting moves the key to the end: the most recently used position.
        self._data[key] = self._data.pop(key)

    def keys(self):
        return list(self._data)

    def __contains__(self, key):
        return key in self._data

    def __len__(self):
        return len(self._data)
