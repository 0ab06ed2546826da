import pytest

from depgraph import CycleError, DependencyGraph, parse_spec, topo_order


def test_readme_example():
    graph = parse_spec("app: web db\nweb: cache\n")
    assert topo_order(graph) == ["db", "cache", "web", "app"]


def test_independent_nodes_sorted_by_name():
    graph = DependencyGraph().add("b").add("a").add("c")
    assert topo_order(graph) == ["a", "b", "c"]


def test_diamond():
    graph = parse_spec("top: left right\nleft: base\nright: base\n")
    order = topo_order(graph)
    assert order.index("base") < order.index("left") < order.index("top")
    assert order.index("right") < order.index("top")
    assert len(order) == 4


def test_spec_comments_and_errors():
    assert len(parse_spec("# services\napp: db  # main\n")) == 2
    with pytest.raises(ValueError):
        parse_spec("app db")


def test_mutual_dependency_is_a_cycle():
    graph = parse_spec("a: b\nb: a\n")
    with pytest.raises(CycleError):
        topo_order(graph)
