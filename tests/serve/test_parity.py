"""Acceptance 5: ``proofgym parity`` on local vs served SearchQA-v0 passes, and fails naming the
tool when one side's tool schema or error kind is changed; a parity file allows a difference."""

from __future__ import annotations

import pytest

from tests.serve_helpers import Served

ENV = "proofgym/SearchQA-v0"


@pytest.fixture(scope="module")
def served():
    with Served(ENV, "--verifier", "inline") as server:
        yield server


@pytest.mark.slow
def test_local_and_served_search_qa_are_at_parity(served, cli):
    proc = cli("parity", ENV, served.ws_url)
    assert "probed 4 tools (find_in_document, open, search, wait) x 5 probes" in proc.stdout
    assert "0 difference(s), 0 not declared" in proc.stdout
    # and between two servers of the same env
    with Served(ENV, "--verifier", "inline") as other:
        assert "0 difference(s)" in cli("parity", served.url, other.ws_url).stdout


@pytest.mark.slow
def test_a_changed_tool_schema_fails_naming_the_tool(cli, tmp_path):
    with Served("tests.serve.parity_envs:SchemaChanged-v0", "--verifier", "inline") as changed:
        proc = cli("parity", ENV, changed.ws_url, check=False)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "DIFFERS  tool find_in_document: tools.find_in_document.function.description" in proc.stdout
        assert "(tools: find_in_document)" in proc.stdout
        rules = tmp_path / "parity.toml"
        rules.write_text('[[allow]]\npath = "tools.find_in_document.function.description"\n'
                         'reason = "the served build words it differently"\n')
        allowed = cli("parity", ENV, changed.ws_url, "--parity", str(rules))
        assert "allowed  tool find_in_document" in allowed.stdout and "0 not declared" in allowed.stdout


def test_a_changed_error_kind_fails_naming_the_tool(cli):
    with Served("tests.serve.parity_envs:ErrorKindChanged-v0", "--verifier", "inline") as changed:
        proc = cli("parity", ENV, changed.ws_url, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "probes.find_in_document.empty.0.error_kind" in proc.stdout
    assert "A: 'not_found'" in proc.stdout and "B: 'execution_error'" in proc.stdout
    assert "(tools: find_in_document)" in proc.stdout  # only that tool differs
