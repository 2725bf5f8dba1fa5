"""The package documents itself: every public name of `stax` (stax.__all__) and every public
method and property of its classes has a docstring and an entry in the type stubs
(python/stax/__init__.pyi, with py.typed), and the stubs' generated part (the op functions)
matches the code (scripts/stubs.py --check)."""
import ast
import inspect
import pathlib
import subprocess
import sys
import types

from test_api_support import REPO, stax

STUB = REPO / "python" / "stax" / "__init__.pyi"


def stub_tree():
    return ast.parse(STUB.read_text())


def stub_names(tree):
    names = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = node
    return names


def stub_members(classes, name):
    """Members a stub class declares, with those of its stub base classes."""
    node = classes[name]
    members = set()
    for item in node.body:
        if isinstance(item, ast.FunctionDef):
            members.add(item.name)
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            members.add(item.target.id)
    for base in node.bases:
        if isinstance(base, ast.Name) and base.id in classes:
            members |= stub_members(classes, base.id)
    return members


def public_members(cls):
    """Public methods and properties the stax package defines on cls (and its stax bases),
    with their objects; plain data (slots, class constants) is left out."""
    found = {}
    for klass in reversed(cls.__mro__):
        if not (klass.__module__ or "").startswith("stax"):
            continue
        for attr, value in vars(klass).items():
            if attr.startswith("_"):
                continue
            if isinstance(value, (types.FunctionType, property, staticmethod, classmethod,
                                  types.MethodDescriptorType, types.GetSetDescriptorType)):
                found[attr] = value
            elif type(value).__name__ == "_tuplegetter":  # namedtuple fields
                found[attr] = value
    return found


def public_objects():
    for name in stax.__all__:
        yield name, getattr(stax, name)


def test_py_typed_is_there():
    assert (REPO / "python" / "stax" / "py.typed").exists()


def test_generated_part_is_current():
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "stubs.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_every_public_name_has_a_stub_and_nothing_stale():
    names = stub_names(stub_tree())
    missing = [name for name in stax.__all__ if name not in names]
    assert not missing, f"no stub entry for {missing}"
    public_stubs = {n for n in names if not n.startswith("_")} - {
        "ArrayLike", "DimLike", "Source", "Feed"}  # the stub's own type aliases
    stale = sorted(public_stubs - set(stax.__all__))
    assert not stale, f"stub entries for names stax does not have: {stale}"
    assert all(not name.startswith("_") or name == "__version__" for name in stax.__all__)
    exported = {n for n in dir(stax) if not n.startswith("_") and
                not inspect.ismodule(getattr(stax, n))}
    assert exported <= set(stax.__all__), sorted(exported - set(stax.__all__))


def test_every_public_class_member_has_a_stub():
    classes = {n: node for n, node in stub_names(stub_tree()).items()
               if isinstance(node, ast.ClassDef)}
    missing = []
    for name, value in public_objects():
        if inspect.isclass(value) and not issubclass(value, BaseException):
            declared = stub_members(classes, name)
            missing += [f"{name}.{attr}" for attr in public_members(value) if attr not in declared]
    assert not missing, f"no stub entry for {missing}"


def test_every_public_function_class_and_member_has_a_docstring():
    missing = []
    for name, value in public_objects():
        if not (inspect.isclass(value) or callable(value)):
            continue
        if not (getattr(value, "__doc__", None) or "").strip():
            missing.append(name)
        if inspect.isclass(value):
            for attr, member in public_members(value).items():
                if not (getattr(member, "__doc__", None) or "").strip():
                    missing.append(f"{name}.{attr}")
    assert not missing, f"no docstring: {missing}"
