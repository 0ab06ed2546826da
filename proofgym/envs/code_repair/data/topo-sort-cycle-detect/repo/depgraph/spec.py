"""Reading dependency specs: one ``node: dep dep ...`` line per node."""

from depgraph.graph import DependencyGraph


def parse_spec(text):
    """A graph from lines like ``app: web db``; blank lines and ``#`` comments are ignored."""
    graph = DependencyGraph()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        node, sep, deps = line.partition(":")
        if not sep or not node.strip():
            raise ValueError(f"line {number}: expected 'node: dep dep ...', got {raw!r}")
        graph.add(node.strip(), *deps.split())
    return graph
