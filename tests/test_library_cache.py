"""Code library text is parsed once per version of its text, block by block (the summary of a text, its names, its
future imports): what reads a module of the library, or a `library.py` not migrated yet, shares one parse."""

from __future__ import annotations

import pytest

from aiflows_jarvis.CodeLibraryFlowModule import defined_names, library_summary, split_future_imports
from aiflows_jarvis.CodeLibraryFlowModule import source as code_source


@pytest.fixture
def parses(monkeypatch):
    """The sources parsed, in order (memory's one parse function, counted)."""
    seen = []
    real = code_source._parse

    def counting(source):
        seen.append(source)
        return real(source)

    monkeypatch.setattr(code_source, "_parse", counting)
    return seen


def a_library(tag: str, functions: int = 400) -> str:
    """A library large enough to be worth keeping (tens of KB), unique to ``tag``."""
    return "from __future__ import annotations\n\n" + "".join(
        f'def {tag}_{n}(x: int) -> int:\n    """Adds {n} ({tag})."""\n    return x + {n}\n\n\n'
        for n in range(functions)
    )


def test_save_codes_reads_of_a_library_share_the_parse_of_the_summary(parses):
    source = a_library("shared")
    summary = library_summary(source, 6000)
    assert defined_names(source)[:2] == ["shared_0", "shared_1"] and len(defined_names(source)) == 400
    futures, body = split_future_imports(source)
    assert futures == ["from __future__ import annotations"] and body.startswith("def shared_0")
    assert len(parses) == 1, "one parse for the summary, the names and the future imports"
    assert library_summary(source, 6000) == summary and len(parses) == 1


def test_a_library_parsed_for_its_names_has_its_summary_ready(parses):
    library_summary(a_library("before"), 6000)  # the size of summary a run asks for
    after = a_library("after")
    defined_names(after)  # save_code checks the new library's names
    library_summary(after, 6000)  # the next memory read
    assert len(parses) == 2, "the new version is parsed once"


def test_the_cached_answers_are_the_ones_a_parse_gives(parses):
    source = a_library("same")
    cached = [library_summary(source, limit) for limit in (None, 6000, 200)]
    code_source._views.clear()
    assert [library_summary(source, limit) for limit in (None, 6000, 200)] == cached
    broken = source + "def broken(:\n"
    for _ in range(2):
        assert library_summary(broken, 6000).startswith("(the code library does not parse: line 2003")
        with pytest.raises(SyntaxError) as error:
            defined_names(broken)
        assert error.value.lineno == 2003


def test_only_a_few_versions_are_kept_and_small_code_is_not(parses):
    for n in range(code_source._VIEWS_KEPT + 3):
        library_summary(a_library(f"v{n}"), 6000)
    assert len(code_source._views) == code_source._VIEWS_KEPT, "older versions are dropped"
    small = "def f():\n    return 1\n"
    defined_names(small)
    defined_names(small)
    assert parses.count(small) == 2, "code of one save_code is parsed each time, and does not push a library out"
    assert len(code_source._views) == code_source._VIEWS_KEPT


def test_blocks_cut_inside_a_statement_are_joined_and_line_numbers_are_the_files():
    """A block may only end where a statement starts: a string, brackets or a decorator spanning the cut join the
    blocks; the names, their lines and the errors are those of the whole file."""
    filler = a_library("fill", functions=300)
    # a string and a list longer than a block, their lines at the first column: a block is cut inside each
    text = 'TEXT = """\n' + "".join(f"def not_a_function_{i}():\n" for i in range(2000)) + '"""\n\n'
    values = "VALUES = [\n" + "".join(f"{i},\n" for i in range(8000)) + "]\n\n"
    tricky = (
        "@staticmethod\ndef decorated():\n    pass\n\ntry:\n    import json\nexcept ImportError:\n    json = None\n\n"
    )
    source = "".join(text + filler + values + tricky for _ in range(3))
    assert len(text) > code_source._BLOCK_CHARS and len(values) > code_source._BLOCK_CHARS
    spans = code_source.definition_spans(source)
    import ast

    expected = [
        (n.name, min([n.lineno] + [d.lineno for d in n.decorator_list]), n.end_lineno)
        for n in ast.parse(source).body
        if isinstance(n, (ast.FunctionDef, ast.ClassDef))
    ]
    assert spans == expected and "not_a_function_0" not in defined_names(source)
    broken = source + "def broken(:\n"
    with pytest.raises(SyntaxError) as error:
        defined_names(broken)
    assert error.value.lineno == source.count("\n") + 1


def test_a_string_of_a_megabyte_is_not_parsed_again_at_every_block_it_spans(parses):
    source = 'DATA = """\n' + "def looks_like_code():\n" * 50_000 + '"""\n\n' + a_library("after", functions=100)
    assert defined_names(source) == [f"after_{n}" for n in range(100)]
    assert sum(map(len, parses)) < 4 * len(source), "the blocks inside the string were parsed again and again"
