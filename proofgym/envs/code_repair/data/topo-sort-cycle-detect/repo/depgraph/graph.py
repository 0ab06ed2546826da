"""A directed graph of 'node depends on dep' edges."""


class DependencyGraph:
    """Nodes and the nodes they depend on. Adding an edge adds both of its nodes."""

    def __init__(self):
        self._deps = {}

    def add(self, node, *deps):
        self._deps.setdefault(node, set()).update(deps)
        for dep in deps:
            self._deps.setdefault(dep, set())
        return self

    @property
    def nodes(self):
        return set(self._deps)

    def dependencies_of(self, node):
        return set(self._deps.get(node, ()))

    def __len__(self):
        return len(self._deps)
