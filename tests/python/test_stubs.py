"""The type stubs (python/tensortree.pyi) and the module name the same things: every public name of
the module is in the stubs and every name in the stubs is in the module, class members included;
and every public function and class of the module has a docstring or a stub."""
import ast
import pathlib

import tensortree

STUBS = pathlib.Path(__file__).resolve().parents[2] / "python" / "tensortree.pyi"
DUNDERS_BOUND = {"__getitem__", "__setitem__", "__delitem__", "__contains__", "__len__", "__enter__", "__exit__",
                 "__dlpack__", "__dlpack_device__", "__init__", "__add__", "__radd__", "__sub__", "__rsub__",
                 "__mul__", "__rmul__", "__truediv__", "__rtruediv__", "__iadd__", "__isub__", "__imul__",
                 "__itruediv__", "__neg__"}
STUB_ONLY = {"ArrayLike", "Key", "BatchIndex", "TreeLike", "PathLike"}  # aliases for the annotations


def stubbed():
    """{top-level name: set of member names (None for a function or a variable)}."""
    names = {}
    for node in ast.parse(STUBS.read_text()).body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = {item.name for item in node.body if isinstance(item, ast.FunctionDef)}
        elif isinstance(node, ast.FunctionDef):
            names[node.name] = None
        elif isinstance(node, ast.AnnAssign):
            names[node.target.id] = None
        elif isinstance(node, ast.Assign):
            names[node.targets[0].id] = None
    return names


def members(cls):
    own = set()
    for name in vars(cls):
        if not name.startswith("_") or name in DUNDERS_BOUND:
            own.add(name)
    return own


def test_every_name_of_the_module_is_stubbed_and_the_reverse():
    stubs = stubbed()
    public = {name for name in dir(tensortree) if not name.startswith("_")}
    assert public == set(stubs) - STUB_ONLY
    for name in public:
        value = getattr(tensortree, name)
        if isinstance(value, type) and not issubclass(value, BaseException):
            assert members(value) <= stubs[name] | {"__init__"}, name
            assert stubs[name] - {"__init__"} <= members(value), name


def test_functions_and_classes_say_what_they_do():
    undocumented = [name for name in dir(tensortree) if not name.startswith("_")
                    and callable(getattr(tensortree, name)) and not (getattr(tensortree, name).__doc__ or "").strip()]
    assert undocumented == []
