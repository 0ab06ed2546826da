# PROOFGYM-CANARY topo-sort-cycle-detect 7f3c9b2e
import pytest

from depgraph import CycleError, DependencyGraph, parse_spec, topo_order


def test_three_node_cycle():
    with pytest.raises(CycleError) as info:
        topo_order(parse_spec("a: b\nb: c\nc: a\n"))
    cycle = info.value.cycle
    assert cycle[0] == cycle[-1]
    assert set(cycle) == {"a", "b", "c"}
    assert len(cycle) == 4


def test_self_dependency():
    with pytest.raises(CycleError) as info:
        topo_order(DependencyGraph().add("svc", "svc"))
    assert info.value.cycle == ["svc", "svc"]


def test_cycle_reached_through_other_nodes():
    spec = "app: api\napi: auth\nauth: users\nusers: sessions\nsessions: auth\n"
    with pytest.raises(CycleError) as info:
        topo_order(parse_spec(spec))
    assert set(info.value.cycle) == {"auth", "users", "sessions"}


def test_cycle_follows_dependency_direction():
    with pytest.raises(CycleError) as info:
        topo_order(parse_spec("x: y\ny: z\nz: x\n"))
    cycle = info.value.cycle
    graph = parse_spec("x: y\ny: z\nz: x\n")
    for node, dep in zip(cycle, cycle[1:]):
        assert dep in graph.dependencies_of(node)


def test_shared_dependencies_are_not_cycles():
    spec = "a: b c d\nb: d e\nc: d e\nd: e\n"
    order = topo_order(parse_spec(spec))
    assert order == ["e", "d", "b", "c", "a"]


def test_error_message_names_the_cycle():
    with pytest.raises(CycleError, match=r"p -> q -> p|q -> p -> q"):
        topo_order(parse_spec("p: q\nq: p\n"))


def test_acyclic_after_cycle_check_is_repeatable():
    graph = parse_spec("app: web db\nweb: cache\n")
    assert topo_order(graph) == topo_order(graph)
