"""The ```python examples of docs/python.md (and of README.md, when it has any) run as tests.
A block right after a line `<!-- needs: MODULE -->` is skipped when MODULE is not installed."""
import importlib.util
import re

import pytest

from test_api_support import REPO, stax  # noqa: F401 - makes `import stax` work in the blocks

BLOCK = re.compile(r"(?:<!-- needs: (?P<needs>[\w.]+) -->\s*\n)?```python\n(?P<code>.*?)```",
                   re.S)


def examples():
    found = []
    for name in ("docs/python.md", "README.md"):
        path = REPO / name
        if not path.exists():
            continue
        text = path.read_text()
        for match in BLOCK.finditer(text):
            line = text.count("\n", 0, match.start("code")) + 1
            found.append(pytest.param(name, line, match.group("code"), match.group("needs"),
                                      id=f"{name}:{line}"))
    return found


def test_docs_have_examples():
    assert len([e for e in examples() if e.values[0] == "docs/python.md"]) >= 8


@pytest.mark.parametrize("name, line, code, needs", examples())
def test_example_runs(name, line, code, needs):
    if needs and importlib.util.find_spec(needs) is None:
        pytest.skip(f"needs {needs}")
    # Line numbers in tracebacks point into the document.
    compiled = compile("\n" * (line - 1) + code, str(REPO / name), "exec")
    exec(compiled, {"__name__": f"example_{line}"})
