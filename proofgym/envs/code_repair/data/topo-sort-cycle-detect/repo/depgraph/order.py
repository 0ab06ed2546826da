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

    def visit(node):
        if node in done:
            return
        done.add(node)
        for dep in sorted(graph.dependencies_of(node)):
            visit(dep)
        order.append(node)

    for node in sorted(graph.nodes):
        visit(node)
    return order
