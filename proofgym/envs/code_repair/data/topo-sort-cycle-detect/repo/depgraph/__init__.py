"""depgraph: dependency graphs and start-up order."""

from depgraph.graph import DependencyGraph
from depgraph.order import CycleError, topo_order
from depgraph.spec import parse_spec

__all__ = ["CycleError", "DependencyGraph", "parse_spec", "topo_order"]
