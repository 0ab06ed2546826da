"""The host's end of a check program's proof (``protocol.ProgramProof``) and the runner's end of
a test's proof (``_Proof`` in ``proofgym/programs/pytest_runner.py``) give the same answer to
every ending of the other side: two copies of one check, held together here."""

from __future__ import annotations

import socket

import pytest

from proofgym.programs.pytest_runner import _Proof
from proofgym.verify.sandboxed.protocol import NONCE_BYTES, ProgramProof

pytestmark = pytest.mark.pure


def _answer(kind: str, nonce: bytes) -> bytes:
    return {"valid": b"\0" + nonce, "failed": b"\1" + nonce, "wrong_nonce": b"\0" + bytes(16),
            "short": b"\0" + nonce[:-1], "trailing": b"\0" + nonce + b"x",
            "none": b""}[kind]


def _play(proof_of, before: bytes, ask: bool, kind: str) -> str | None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.setblocking(False)
        proof = proof_of(ours)
        theirs.sendall(before + (b"?" if ask else b""))
        while proof.feed() == "more":
            pass
        nonce = b""
        if ask:
            while len(nonce) < NONCE_BYTES:
                nonce += theirs.recv(NONCE_BYTES - len(nonce))
        theirs.sendall(_answer(kind, nonce) or b"")
        theirs.shutdown(socket.SHUT_WR)
        while proof.feed() != "end":
            pass
        return proof.outcome()


@pytest.mark.parametrize("before", [b"", b"noise", b"\0" * 17])
@pytest.mark.parametrize("ask", [True, False])
@pytest.mark.parametrize("kind", ["valid", "failed", "wrong_nonce", "short", "trailing", "none"])
def test_the_host_and_the_runner_judge_a_proof_alike(before: bytes, ask: bool, kind: str):
    host = _play(ProgramProof, before, ask, kind)
    runner = _play(_Proof, before, ask, kind)
    assert host == runner
    assert (host == "passed") == (ask and kind == "valid")
