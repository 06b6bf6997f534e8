"""The package's layers (docs/architecture.md): a module imports only its own
package and the layers below it, never one above nor a sibling of its own
rank, at module level or inside a function (TYPE_CHECKING imports too); and
the hint's settings are declared in one place, ``policies/hint.py``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "hrlsched"

#: lowest first; a package or top-level module imports only from lower ranks (and itself)
LAYERS: list[tuple[str, ...]] = [
    ("errors", "units", "io", "outdir", "data", "seeds", "stats", "schema"),
    ("provenance",),
    ("core",),
    ("cluster",),
    ("config",),
    ("perf",),
    ("workload",),
    ("contract",),
    ("sim", "policies"),
    ("scenario",),
    ("envs", "run"),
    ("agent",),
    ("rivals",),
    ("calibration", "experiments"),
    ("report",),
    ("cli_simulate", "commands"),
    ("cli",),
    ("entry", "__init__"),
]
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}


def top(path: Path, root: Path = SRC) -> str:
    return path.relative_to(root).parts[0].removesuffix(".py")


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, top-level hrlsched part) of every hrlsched import in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names if node.module == "hrlsched"]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for n in names:
            parts = n.split(".")
            if parts[0] == "hrlsched" and len(parts) > 1:
                out.append((node.lineno, parts[1]))
    return out


def violations(root: Path = SRC) -> list[str]:
    bad = []
    for path in sorted(root.rglob("*.py")):
        own = top(path, root)
        if own not in RANK:
            bad.append(f"{path.relative_to(root)}: {own!r} is in no layer (tests/test_layers.py LAYERS)")
            continue
        for line, other in imports(path):
            if other == own:
                continue
            if other not in RANK:
                bad.append(f"{path.relative_to(root)}:{line}: imports {other!r}, which is in no layer")
            elif RANK[other] >= RANK[own]:
                bad.append(f"{path.relative_to(root)}:{line}: {own!r} (layer {RANK[own]}) imports {other!r} "
                           f"(layer {RANK[other]}, {'a sibling' if RANK[other] == RANK[own] else 'above'})")
    return bad


def test_every_package_is_in_a_layer() -> None:
    parts = {top(p) for p in SRC.rglob("*.py")}
    assert parts <= set(RANK), sorted(parts - set(RANK))


def test_no_module_imports_a_layer_above_its_own() -> None:
    bad = violations()
    assert not bad, "\n".join(bad)


def test_the_check_fails_on_an_import_from_above(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "x.py").write_text("def f():\n    from hrlsched.agent.policy import HRLScheduler\n")
    (tmp_path / "sim.py").write_text("from hrlsched import policies\n")
    (tmp_path / "envs.py").write_text("import hrlsched.scenario\n")
    bad = violations(tmp_path)
    assert len(bad) == 2 and f"'policies' (layer {RANK['policies']}) imports 'agent'" in bad[0] and "a sibling" in bad[1]


#: the hint's settings (``HintConfig``'s fields that only the hint has) and the names they had elsewhere
#: (``recheck_s`` is also ``Decision.recheck_s``, the engine's, and ``gap``, ``bonus``, ``window``,
#: ``policy`` are words other parts use for other things: not checked)
HINT_NAMES = ("remaining_weight", "keep_s", "keep_frac", "on_menu", "first_order", "observe_rounds",
              "remaining_from", "reserve_running", "hint_options", "hint_on_menu", "remaining_weights")


def declarations(path: Path) -> list[tuple[int, str]]:
    """(line, name) of each function parameter and class-level annotated
    field in ``path`` named as a hint setting."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
                if arg.arg in HINT_NAMES:
                    out.append((arg.lineno, arg.arg))
        elif isinstance(node, ast.ClassDef):
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                        and stmt.target.id in HINT_NAMES:
                    out.append((stmt.lineno, stmt.target.id))
    return out


def test_the_hints_settings_are_declared_once() -> None:
    home = SRC / "policies" / "hint.py"
    assert {n for _, n in declarations(home)} >= set(HINT_NAMES[:8])
    elsewhere = [f"{p.relative_to(SRC)}:{line}: {name}" for p in sorted(SRC.rglob("*.py")) if p != home
                 for line, name in declarations(p)]
    assert not elsewhere, "declared outside policies/hint.py (take a HintConfig):\n" + "\n".join(elsewhere)


@pytest.mark.parametrize("text, found", [("def f(keep_s=0.0):\n    pass\n", ["keep_s"]),
                                         ("class C:\n    window: str\n    keep_frac: float\n", ["keep_frac"])])
def test_the_declaration_check_finds_them(tmp_path: Path, text: str, found: list[str]) -> None:
    p = tmp_path / "m.py"
    p.write_text(text)
    assert [n for _, n in declarations(p)] == found
