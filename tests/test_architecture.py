"""The layers of the code stay layers (issue 32): every import runs down a floor, nothing outside
the model classes asks which kind a model is, and no optional hook is found by name."""

import ast
import re
from pathlib import Path

import pytest

from zoo.specs import hooks

ROOT = Path(__file__).resolve().parent.parent
FLOORS = {
    "errors": 0, "dropout": 0, "provenance": 0, "roles": 0, "children": 0, "near_paths": 0, "files": 1, "metric_names": 1,
    "records": 2, "specs": 2, "optim": 3, "metrics": 3, "parts": 4, "kernels": 5, "variants": 6, "model": 7,
    "tasks": 8, "interop": 9, "trainer": 10, "sweep": 11, "compare": 12, "commands": 13, "cli": 14,
    "__init__": 15,
}
"""Each room of the zoo (a top-level module or package of zoo/, and variants/ installed as
zoo.variants) on its floor: a room imports only from rooms on lower floors."""
MODEL_CLASSES = {"zoo_model.py", "encoder_decoder.py", "decoder_only.py", "encoder_only.py", "kinds.py"}


def sources() -> list[tuple[str, Path]]:
    """(room, file) of every Python file of the zoo and its parts."""
    files = [(p.relative_to(ROOT / "zoo").parts[0].removesuffix(".py"), p) for p in (ROOT / "zoo").rglob("*.py")]
    return files + [("variants", p) for p in (ROOT / "variants").rglob("*.py")]


def imported_rooms(path: Path) -> set[str]:
    rooms = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else \
            [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
        rooms |= {name.split(".")[1] if name.count(".") else "__init__" for name in names if name.split(".")[0] == "zoo"}
    return rooms


def test_every_room_has_a_floor():
    assert {room for room, _ in sources()} <= FLOORS.keys(), "place a new module or package on a floor in FLOORS"


@pytest.mark.parametrize("room, path", sources(), ids=[str(p.relative_to(ROOT)) for _, p in sources()])
def test_imports_run_down(room, path):
    upward = sorted(there for there in imported_rooms(path) - {room} if FLOORS[there] >= FLOORS[room])
    assert not upward, f"{path.relative_to(ROOT)} ({room}, floor {FLOORS[room]}) imports from {upward}"


def test_no_kind_is_asked_for_by_name_outside_the_model_classes():
    asked = re.compile(r"\.kind\s*(==|!=|\bin\b|\bnot in\b)\s*[\"'(\[{]")
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}" for _, path in sources()
             if path.name not in MODEL_CLASSES or path.parent.name != "model"
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if asked.search(line)]
    assert not found, "ask the model's class (zoo.model.kinds.model_class) instead:\n" + "\n".join(found)


def test_no_optional_hook_is_found_with_getattr():
    protocols = [value for value in vars(hooks).values() if isinstance(value, type) and getattr(value, "_is_protocol", False)]
    members = {name for protocol in protocols for name in [*vars(protocol), *getattr(protocol, "__annotations__", {})]
               if not name.startswith("_")}
    assert {"spec_problem", "auto_width", "init_gain", "aux_loss", "compose", "takes_real_tokens"} <= members
    by_name = re.compile(r"(getattr|hasattr)\([^,]+,\s*[\"'](" + "|".join(sorted(members)) + r")[\"']")
    found = [f"{path.relative_to(ROOT)}:{number}" for _, path in sources()
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if by_name.search(line)]
    assert not found, f"check a part against its Protocol with zoo.specs.hooks.implements: {found}"


def module_name(path: Path) -> str:
    """The dotted module of a source file (variants/ is installed as zoo.variants)."""
    parts = ["zoo", "variants", *path.relative_to(ROOT / "variants").with_suffix("").parts] \
        if path.is_relative_to(ROOT / "variants") else list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_imports(path: Path) -> set[str]:
    """The zoo modules a file imports at any depth (its body, `if TYPE_CHECKING:` blocks and its
    functions: an import inside a function only delays a circle): `from zoo.x import y` counts as
    zoo.x.y where that is a module."""
    known = {module_name(p) for _, p in sources()}
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("zoo"):
            found.update(f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                         for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("zoo"))
    return found & known


def test_no_module_imports_one_that_imports_it_back():
    """Circles of imports at any depth (checkpoint, run folder and step once formed one; replay,
    reproduce and retrain another, closed inside functions) are 0."""
    graph = {module_name(p): module_imports(p) - {module_name(p)} for _, p in sources()}
    circles, done = [], set()

    def walk(node: str, path: list[str]) -> None:
        if node in path:
            circles.append([*path[path.index(node):], node])
            return
        if node in done:
            return
        for nxt in sorted(graph.get(node, ())):
            walk(nxt, [*path, node])
        done.add(node)

    for start in sorted(graph):
        walk(start, [])
    assert not circles, "import circles: " + "; ".join(" -> ".join(c) for c in circles[:5])


def test_the_model_imports_nothing_inside_its_functions():
    """An import inside a function hides a cycle from the layer test; the model's count is 0."""
    found = [f"{path.relative_to(ROOT)}:{node.lineno}" for path in (ROOT / "zoo" / "model").rglob("*.py")
             for function in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
             for node in ast.walk(function) if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert not found, found


def test_no_room_loads_a_higher_one_by_name():
    """A module's name as a string (import_module, a list of packages to load) counts as an import."""
    named = re.compile(r"^zoo\.([a-z_]+)(\.[a-z_]+)*$")
    found = []
    for room, path in sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            values = node.args if isinstance(node, ast.Call) else node.elts if isinstance(node, (ast.List, ast.Tuple)) else []
            for value in values:
                match = isinstance(value, ast.Constant) and isinstance(value.value, str) and named.match(value.value)
                if match and match.group(1) in FLOORS and match.group(1) != room and FLOORS[match.group(1)] >= FLOORS[room]:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {value.value}")
    assert not found, found


ROLES = {"main": "a module's entry point (python -m)", "register": "a package's registration decorator"}
"""Names that several modules of one package define for the same role, by convention."""
FAMILY_RECORD = {"ACTIVATIONS", "FFN", "FREE", "GATED", "LAYER", "NAMES", "RENAMES", "common", "common_config",
                 "computed", "config", "layout_fields", "names", "spec_fields", "views"}
"""The parts of a family's record that each family module of zoo/interop spells alike (zoo.interop.family)."""


def module_level_names(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if not name.startswith("__")}


def test_a_name_means_one_thing_within_a_package():
    """Two modules of one package that define one name mean two things by it (CorpusFormat was a
    format's name in one module and the format itself in the next); only a role every module of
    the package plays alike may share a name."""
    found: dict[tuple[Path, str], list[str]] = {}
    for _, path in sources():
        for name in module_level_names(path):
            found.setdefault((path.parent, name), []).append(path.name)
    shared = sorted(f"{folder.relative_to(ROOT)}: {name} in {', '.join(sorted(files))}"
                    for (folder, name), files in found.items() if len(files) > 1 and name not in ROLES
                    and not (folder.name == "interop" and name in FAMILY_RECORD))
    assert not shared, shared


def rooms() -> set[str]:
    return {room for room, _ in sources()} - {"__init__"}


def test_the_contributing_guide_names_every_room():
    """docs/contributing.md's layout names each room of the house (`zoo/ROOM` or `zoo/ROOM.py`,
    and `variants/`): a new room is described where a new engineer looks first."""
    guide = (ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
    named = {room for room in rooms() if f"`zoo/{room}`" in guide or f"`zoo/{room}.py`" in guide
             or (room == "variants" and "`variants/`" in guide)}
    assert named == rooms(), f"rooms the guide does not name: {sorted(rooms() - named)}"
