"""docs/architecture.md cannot rot silently (issue 37): its request-path block is what
``benchmarks/request_path.py`` wrote and the path it shows is this tree's, its layers are
``.importlinter``'s, its error tree is ``errors.py``'s and its table of public names lists
only names in those modules' ``__all__`` (tests/test_public_api.py pins the ``__all__``s,
tests/test_layout.py checks that the page names every module).

The block's figures are kept as JSON in its first marker and the block must be exactly what the
script's ``render`` makes of them: a hand edit, or a block in an older format, fails. The
numbers (frames, functions entered, the time) are the script's to refresh; the path itself
(the modules from ``arank`` to the backend, in order) is traced again here, since it is what
the page says in words.
"""

from __future__ import annotations

import configparser
import importlib
import re
import sys
from pathlib import Path

import pytest

from permsc_integrations import errors

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
sys.path.insert(0, str(ROOT / "benchmarks"))
import request_path  # noqa: E402

REFRESH = "run `python benchmarks/request_path.py` to rewrite it"


def fenced_after(marker: str) -> list[str]:
    """The lines of the ``text`` block that follows ``<!-- marker -->`` in the page."""
    text = DOC.read_text(encoding="utf-8")
    found = re.search(rf"<!-- {re.escape(marker)} -->\n```text\n(.*?)\n```", text, re.S)
    assert found, f"docs/architecture.md has no ```text block after <!-- {marker} -->"
    return found.group(1).splitlines()


def test_the_request_path_block_is_what_the_script_wrote() -> None:
    figures, body = request_path.documented(DOC.read_text(encoding="utf-8"))
    assert figures, f"the request_path block of docs/architecture.md is empty: {REFRESH}"
    assert body == request_path.render(figures), (
        f"the request_path block of docs/architecture.md was edited by hand or is in an older "
        f"format: {REFRESH}"
    )


def test_the_documented_path_is_this_trees() -> None:
    figures, _ = request_path.documented(DOC.read_text(encoding="utf-8"))
    traced = request_path.figures(request_path.trace(ROOT))
    documented = {label: path["modules"] for label, path in figures["paths"].items()}
    now = {label: path["modules"] for label, path in traced["paths"].items()}
    assert documented == now, f"the request path changed: {REFRESH}"


def test_a_hand_edit_of_the_block_is_caught() -> None:
    figures, body = request_path.documented(DOC.read_text(encoding="utf-8"))
    edited = body.replace(f"| {figures['paths']['first round']['frames']} |", "| 11 |", 1)
    assert edited != body
    assert edited != request_path.render(figures)
    with pytest.raises(ValueError, match="no request_path markers"):
        request_path.documented("# a page without the block\n")


def test_the_layers_are_importlinters() -> None:
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter", encoding="utf-8")
    layers = config["importlinter:contract:layers"]["layers"].strip().splitlines()
    declared = [line.strip().replace("permsc_integrations.", "") for line in layers]
    assert fenced_after("importlinter:layers") == declared


def test_the_error_tree_is_errors_py() -> None:
    classes = [getattr(errors, name) for name in errors.__all__]
    tree = {
        cls.__name__: next(
            (base.__name__ for base in cls.__bases__ if issubclass(base, errors.PermscError)),
            None,
        )
        for cls in classes
        if isinstance(cls, type) and issubclass(cls, errors.PermscError)
    }
    documented: dict[str, str | None] = {}
    above: list[str] = []
    for line in fenced_after("errors:tree"):
        depth = (len(line) - len(line.lstrip())) // 2
        del above[depth:]
        documented[line.strip()] = above[-1] if above else None
        above.append(line.strip())
    assert documented == tree


def public_rows() -> list[tuple[list[str], list[str]]]:
    """The "What is public" table: each row's modules and the names it lists."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## What is public", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = line.split(" | ")
        if len(cells) != 2 or not line.startswith("| `"):
            continue
        modules = re.findall(r"`([\w.]+)`", cells[0])
        modules = [m if m.startswith("permsc") else f"permsc_integrations{m}" for m in modules]
        names = [n for n in re.findall(r"`([\w.]+)`", cells[1]) if n.isidentifier()]
        rows.append((modules, names))
    return rows


def test_the_public_table_names_only_public_names() -> None:
    rows = public_rows()
    assert len(rows) > 10
    for modules, names in rows:
        declared = {n for m in modules for n in importlib.import_module(m).__all__}
        assert [n for n in names if n not in declared] == [], modules
