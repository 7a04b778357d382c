"""spec/adapter.md's "Rules the model enforces" and the model's code name the same rules.

Why: an implementer reads the page, not the model. A rule the model enforces and the page
does not state is a rule the implementer has to guess (issue 25: that recovery must make
durable what it shows, that a pending fence already refuses adds, which error wins); a rule
the page states and the model does not enforce is a promise nobody checks. So:

- every divergence the model raises names its rule (an AST check of every ``Divergence``
  call in models/: a ``rule=`` keyword);
- every rule id the model's code names (in a ``rule=``, a docstring or a comment: the code
  that carries a rule out cites it) is a row of the page's tables, and every row is named
  somewhere in the model's code;
- the rule ids a divergence message carries are the page's.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from models.bookie.bookie import Divergence

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "spec" / "adapter.md"
RULE = re.compile(r"\bR-[A-Z]+(?:-[A-Z]+)*\b")


def page_rules() -> set[str]:
    text = PAGE.read_text()
    section = text[text.index("## Rules the model enforces") : text.index("## Capabilities")]
    return set(re.findall(r"^\| `(R-[A-Z-]+)` \|", section, re.MULTILINE))


def model_sources() -> list[Path]:
    return sorted((ROOT / "models").rglob("*.py"))


def test_the_page_has_the_rules_tables() -> None:
    rules = page_rules()
    assert len(rules) >= 25, sorted(rules)
    assert {"R-RECOVERY-SHOWN", "R-FENCE-PENDING", "R-ADMIT-ORDER", "R-ACK-ASYNC"} <= rules


def test_every_divergence_in_the_model_names_its_rule() -> None:
    missing = []
    for path in model_sources():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Divergence":
                keywords = {keyword.arg: keyword.value for keyword in node.keywords}
                value = keywords.get("rule")
                if value is None:
                    missing.append(f"{path.relative_to(ROOT)}:{node.lineno}")
                elif isinstance(value, ast.Constant):
                    assert value.value in page_rules(), (path, node.lineno, value.value)
    assert missing == [], "Divergence without a rule: " + ", ".join(missing)


def test_the_page_and_the_model_name_the_same_rules() -> None:
    named = set()
    for path in model_sources():
        named |= set(RULE.findall(path.read_text()))
    page = page_rules()
    assert named - page == set(), f"the model names, the page does not state: {named - page}"
    assert page - named == set(), f"the page states, the model never names: {page - named}"


def test_a_divergence_message_carries_its_rule() -> None:
    divergence = Divergence(7, "read 1:0 answered no_entry; allowed: data", rule="R-READ-ACKED")
    assert str(divergence) == "step 7: read 1:0 answered no_entry; allowed: data [R-READ-ACKED]"
    assert divergence.rule == "R-READ-ACKED"
