# The grader's epilogue (run_program(proof=True), host side: proofgym/verify/sandboxed/program.py).
#
# This file is a program, not a module of proofgym: the host runs its source in the grading
# sandbox (``python3 -c SOURCE FD PLAIN MODE TARGET *ARGS``); it uses the standard library only.
# It runs the program (a file, MODE "file", or -c code) as ``__main__`` and, only if the
# program's last statement ran, proves it on the socket FD: it asks (``?``), reads the host's
# fresh 16-byte nonce and answers outcome 0 and that nonce. PLAIN "1": every comparison and
# arithmetic operand written in the program must be a builtin value (``proofgym_plain``).
import ast
import builtins
import os
import socket
import sys
import types


def _main(_type=type, _id=id, _iter=iter, _TypeError=TypeError):
    fd, plain, mode, target = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3], sys.argv[4]
    sock = socket.socket(fileno=fd)
    mro = type.__dict__["__mro__"].__get__
    own = type.__dict__["__dict__"].__get__
    kinds = (int, float, complex, str, bytes, bytearray, bool, type(None), list, tuple, dict,
             set, frozenset)
    guarded = {"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__",
               "__bool__", "__len__", "__contains__", "__iter__", "__getitem__", "__abs__",
               "__neg__", "__pos__", "__float__", "__int__", "__index__", "__round__",
               "__complex__"}
    for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or",
               "xor", "lshift", "rshift"):
        guarded |= {f"__{op}__", f"__r{op}__"}

    def proofgym_plain(value):
        stack, seen = [value], set()
        while stack:
            v = stack.pop()
            if _id(v) in seen:
                continue
            seen.add(_id(v))
            chain = mro(_type(v))
            base = next((k for k in chain if k in kinds), None)
            if base is None:
                raise _TypeError(f"not a plain value: a {_type(v).__qualname__} object (a "
                                 "comparison or arithmetic operand must be a builtin value)")
            for klass in chain:
                if klass is base:
                    break
                bad = sorted(guarded & set(own(klass)))
                if bad:
                    raise _TypeError(f"not a plain value: {_type(v).__qualname__} defines "
                                     f"{', '.join(bad)}")
            if base is dict:
                stack.extend(dict.keys(v))
                stack.extend(dict.values(v))
            elif base in (list, tuple, set, frozenset):
                stack.extend(base.__iter__(v))
        return value

    class Guard(ast.NodeTransformer):
        def _wrap(self, node):
            return ast.Call(ast.Name("proofgym_plain", ast.Load()), [node], [])

        def visit_Compare(self, node):
            self.generic_visit(node)
            if all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
                return node
            node.left = self._wrap(node.left)
            node.comparators = [self._wrap(c) for c in node.comparators]
            return node

        def visit_BinOp(self, node):
            self.generic_visit(node)
            node.left, node.right = self._wrap(node.left), self._wrap(node.right)
            return node

    if mode == "-c":
        source, filename = target, "<string>"
        sys.argv = ["-c", *sys.argv[5:]]
        sys.path[0] = ""
    else:
        filename = target
        with open(target, "rb") as f:
            source = f.read()
        sys.argv = [target, *sys.argv[5:]]
        sys.path[0] = os.path.dirname(os.path.abspath(target))
    tree = compile(source, filename, "exec", ast.PyCF_ONLY_AST)
    if plain:
        tree = ast.fix_missing_locations(Guard().visit(tree))
        builtins.proofgym_plain = proofgym_plain
    main = types.ModuleType("__main__")
    main.__file__ = filename
    main.__builtins__ = builtins
    if plain:
        main.proofgym_plain = proofgym_plain
    sys.modules["__main__"] = main
    exec(compile(tree, filename, "exec"), main.__dict__)
    sock.setblocking(True)  # the program may have made the descriptor non-blocking
    sock.sendall(b"?")  # the program's last statement has run
    nonce = b""
    while len(nonce) < 16:
        chunk = sock.recv(16 - len(nonce))
        if not chunk:
            return
        nonce += chunk
    sock.sendall(b"\0" + nonce)

_main()
del _main
