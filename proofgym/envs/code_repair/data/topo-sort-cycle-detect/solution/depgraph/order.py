"""Topological order: every node after all of its dependencies."""


class CycleError(ValueError):
    """The graph has a cycle, so no order exists.

    ``cycle`` lists the nodes on the cycle in dependency order, the first node repeated at the end,
    e.g. ``["a", "b", "a"]`` when a depends on b and b on a.
    """

    def __init__(self, cycle):
        super().__init__("dependency cycle: " + " -> ".join(map(str, cycle)))
        self.cycle = list(cycle)


def topo_order(graph):
    """All nodes of ``graph``, each after its dependencies; ties broken by name (deterministic)."""
    order = []
    done = set()
    path = []  # nodes being visited: meeting one of them again means a cycle

    def visit(node):
        if node in done:
            return
        if node in path:
            raise CycleError([*path[path.index(node):], node])
        path.append(node)
        for dep in sorted(graph.dependencies_of(node)):
            visit(dep)
        path.pop()
        done.add(node)
        order.append(node)

    for node in sorted(graph.nodes):
        visit(node)
    return order
