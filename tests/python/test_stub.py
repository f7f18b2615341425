# The type stub (python/infer/_infer.pyi) names every binding of the extension module, and every
# stubbed name exists: editors complete exactly what is there.
import ast
import pathlib

import infer
from infer import _infer

STUB = pathlib.Path(infer.__file__).with_name("_infer.pyi")


def stub_names():
    tree = ast.parse(STUB.read_text())
    top, members = set(), {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            top.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            top.add(node.target.id)
        if isinstance(node, ast.ClassDef):
            members[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
    return top, members


def test_stub_matches_module():
    top, members = stub_names()
    module = {n for n in dir(_infer) if not n.startswith("__")} | {"__version__"}
    assert module == top
    for cls, stubbed in members.items():
        if cls == "Error":
            continue
        # Newer pybind11 (e.g. PyTorch's bundled copy) adds its own _pybind11_* hooks to every class.
        real = {n for n in vars(getattr(_infer, cls)) if not n.startswith("__") and not n.startswith("_pybind11")}
        real |= {n for n in ("__dlpack__", "__dlpack_device__") if n in vars(getattr(_infer, cls))}
        assert real == stubbed - {"__init__"}, cls
