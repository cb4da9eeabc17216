"""scripts/mutants.py makes the changes it says, only where behaviour lives."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "mutants.py"
_spec = importlib.util.spec_from_file_location("chatledger_mutants", SCRIPT)
assert _spec is not None and _spec.loader is not None
mutants = importlib.util.module_from_spec(_spec)
sys.modules["chatledger_mutants"] = mutants  # dataclasses look their module up
_spec.loader.exec_module(mutants)

SOURCE = '''
LIMIT = 3
__all__ = ["f"]


def f(x: int = 1, flag: bool = True) -> bool:
    """A docstring, 42."""
    if x < LIMIT and not flag:
        return x + 1 == 2
    return x in (1, 2) or False
'''


def _changes() -> list[str]:
    return [change for _, _, change in mutants._sites(ast.parse(SOURCE))]


def test_only_function_bodies_are_mutated():
    changes = _changes()
    # Check module constants, __all__, defaults in the signature, annotations and the
    # docstring are left alone: nothing on lines 2-6 or 7 (the docstring's 42).
    assert all(int(c.split()[1].rstrip(":")) >= 8 for c in changes), changes
    assert sorted(changes) == sorted(
        [
            "line 8: Lt -> LtE",
            "line 8: And -> Or",
            "line 8: not dropped",
            "line 9: Eq -> NotEq",
            "line 9: Add -> Sub",
            "line 9: 1 -> 2",
            "line 9: 2 -> 3",
            "line 10: In -> NotIn",
            "line 10: Or -> And",
            "line 10: 1 -> 2",
            "line 10: 2 -> 3",
            "line 10: False -> True",
        ]
    )


def test_each_mutant_is_the_module_with_that_one_change():
    changes = _changes()
    for index, change in enumerate(changes):
        made = mutants.mutated(SOURCE, index)
        assert made is not None and made[1] == change
        text = made[0]
        assert text != ast.unparse(ast.parse(SOURCE))
        compile(text, "<mutant>", "exec")  # still Python
    flipped = mutants.mutated(SOURCE, changes.index("line 8: Lt -> LtE"))
    assert flipped is not None and "x <= LIMIT" in flipped[0]
    assert mutants.mutated(SOURCE, len(changes)) is None
