"""The shape of the Python code, where no linter rule counts it (issue 29): no function of the
four packages over MAX_FUNCTION_LINES lines, no controller module over MAX_CONTROLLER_MODULE_LINES.

ruff (ruff.toml) bounds a function's complexity, branches and statements; this bounds its length
in lines, from its `def` to its last line (decorators left out, docstring, comments and blank
lines counted: what a reader scrolls through). A nested function counts in its own right and
inside the one that holds it. The generated stubs (loadfleet/v1) are not ours to shape."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONTROLLER = ROOT / "controller/src/loadfleet/controller"
PACKAGES = (
    CONTROLLER,
    ROOT / "agent/src/loadfleet/agent",
    ROOT / "targets/src/loadfleet/targets",
    ROOT / "proto/python/loadfleet/wire",
)
MAX_FUNCTION_LINES = 50
MAX_CONTROLLER_MODULE_LINES = 400


def sources(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def function_lengths(source: str) -> Iterator[tuple[str, int, int]]:
    """(qualified name, line of its `def`, length in lines) of every function and method."""

    def visit(node: ast.AST, prefix: str) -> Iterator[tuple[str, int, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                assert child.end_lineno is not None
                yield prefix + child.name, child.lineno, child.end_lineno - child.lineno + 1
                yield from visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                yield from visit(child, f"{prefix}{child.name}.")
            else:
                yield from visit(child, prefix)

    yield from visit(ast.parse(source), "")


def long_functions(path: Path, limit: int) -> list[str]:
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    return [
        f"{where}:{line} {name}: {length} lines"
        for name, line, length in function_lengths(path.read_text())
        if length > limit
    ]


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_function_is_longer_than_a_screen(package):
    files = sources(package)
    assert files, f"{package} holds no Python file: has it moved?"
    offenders = [o for path in files for o in long_functions(path, MAX_FUNCTION_LINES)]
    assert not offenders, f"functions over {MAX_FUNCTION_LINES} lines (split them into named pieces):\n" + "\n".join(
        offenders
    )


def test_no_controller_module_holds_more_than_one_concept():
    lengths = {p.relative_to(ROOT): len(p.read_text().splitlines()) for p in sources(CONTROLLER)}
    offenders = [f"{path}: {n} lines" for path, n in lengths.items() if n > MAX_CONTROLLER_MODULE_LINES]
    assert not offenders, (
        f"controller modules over {MAX_CONTROLLER_MODULE_LINES} lines (does each hold two concepts?):\n"
        + "\n".join(offenders)
    )


# The measure itself, on made-up code: a check that cannot fail proves nothing.
def body(n_lines: int, indent: int = 4) -> str:
    return "".join(f"{' ' * indent}x{i} = {i}\n" for i in range(n_lines))


@pytest.mark.parametrize(
    "source, expected",
    [
        ("def f():\n" + body(49), [("f", 1, 50)]),
        ("@decorator\nasync def f():\n" + body(50), [("f", 2, 51)]),
        (
            "class C:\n    def m(self):\n" + body(2, indent=8) + "\n\nx = 1\n",
            [("C.m", 2, 3)],
        ),
        (
            "def outer():\n    def inner():\n        return 1\n    return inner\n",
            [("outer", 1, 4), ("outer.inner", 2, 2)],
        ),
        ("if True:\n    def g():\n        pass\n", [("g", 2, 2)]),
    ],
    ids=["50 lines", "51 lines, decorated", "a method", "nested", "under an if"],
)
def test_a_function_is_measured_from_its_def_to_its_last_line(source, expected):
    assert list(function_lengths(source)) == expected


def test_a_long_function_is_named_with_its_file_line_and_length(tmp_path):
    path = tmp_path / "long.py"
    path.write_text(
        "x = 1\n\n\nclass C:\n    def fits(self):\n        pass\n\n    def long(self):\n" + body(50, indent=8)
    )
    assert long_functions(path, MAX_FUNCTION_LINES) == [f"{path}:8 C.long: 51 lines"]
