"""The code library is parsed once per version of its text, not at every memory read: MemoryReading reads it every
round and save_code again, and a 5 MB library took seconds per parse (`benchmarks/large_library.py` gives figures)."""
from __future__ import annotations

import pytest

from aiflows_jarvis.CoreFlowModule import code_library
from aiflows_jarvis.CoreFlowModule.memory import defined_names, library_summary, split_future_imports
from aiflows_jarvis.MemoryReadingFlowModule import MemoryReadingAtomicFlow


@pytest.fixture
def parses(monkeypatch):
    """The sources parsed, in order (memory's one parse function, counted)."""
    seen = []
    real = code_library._parse

    def counting(source):
        seen.append(source)
        return real(source)

    monkeypatch.setattr(code_library, "_parse", counting)
    return seen


def a_library(tag: str, functions: int = 400) -> str:
    """A library large enough to be worth keeping (tens of KB), unique to ``tag``."""
    return "from __future__ import annotations\n\n" + "".join(
        f'def {tag}_{n}(x: int) -> int:\n    """Adds {n} ({tag})."""\n    return x + {n}\n\n\n'
        for n in range(functions))


def test_an_unchanged_library_is_not_parsed_again_and_a_changed_one_is(tmp_path, parses):
    path = tmp_path / "library.py"
    path.write_text(a_library("first"))
    reader = MemoryReadingAtomicFlow.instantiate_from_default_config(output_interface=["code_library"],
                                                              retrieval={"enabled": False})  # the summary's cut
    files = {"memory_files": {"code_library": str(path)}}
    first = reader.run(files)["code_library"]
    assert first.startswith("(the library is large") and "first_0," in first
    for _ in range(5):
        assert reader.run(files)["code_library"] == first
    assert len(parses) == 1, "five more reads of the same library, no parse"

    path.write_text(a_library("second"))
    second = reader.run(files)["code_library"]
    assert "second_0," in second and "first_0" not in second
    assert len(parses) == 2, "a changed library is parsed again"


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
    code_library._views.clear()
    assert [library_summary(source, limit) for limit in (None, 6000, 200)] == cached
    broken = source + "def broken(:\n"
    for _ in range(2):
        assert library_summary(broken, 6000).startswith("(the code library does not parse: line 2003")
        with pytest.raises(SyntaxError) as error:
            defined_names(broken)
        assert error.value.lineno == 2003


def test_only_a_few_versions_are_kept_and_small_code_is_not(parses):
    for n in range(code_library._VIEWS_KEPT + 3):
        library_summary(a_library(f"v{n}"), 6000)
    assert len(code_library._views) == code_library._VIEWS_KEPT, "older versions are dropped"
    small = "def f():\n    return 1\n"
    defined_names(small)
    defined_names(small)
    assert parses.count(small) == 2, "code of one save_code is parsed each time, and does not push a library out"
    assert len(code_library._views) == code_library._VIEWS_KEPT


def test_a_save_into_a_large_library_parses_it_once_and_compiles_it_never(tmp_path, parses, monkeypatch):
    """save_code into a library read at the last round (its view cached): the new library is parsed once (its view
    serves the next read, ExtendLibrary's digests and the run report's added functions); the joined text is not
    compiled again (both parts parse), which took seconds for a 5 MB library."""
    import ast
    import builtins

    from aiflows_jarvis.app.run_report import Entry, added_functions
    from aiflows_jarvis.ExtendLibraryFlowModule import SaveCodeAtomicFlow
    from aiflows_jarvis.ExtendLibraryFlowModule.SaveCodeAtomicFlow import definition_digests

    big = []
    real_compile, real_ast_parse = builtins.compile, ast.parse

    def counting_compile(source, *args, **kwargs):
        flags = args[2] if len(args) > 2 else kwargs.get("flags", 0)
        if isinstance(source, str) and len(source) > 10_000 and not flags & ast.PyCF_ONLY_AST:  # (ast.parse's)
            big.append("compile")
        return real_compile(source, *args, **kwargs)

    def counting_ast_parse(source, *args, **kwargs):
        if isinstance(source, str) and len(source) > 10_000 and source not in parses:
            big.append("ast.parse")
        return real_ast_parse(source, *args, **kwargs)

    path = tmp_path / "library.py"
    path.write_text(a_library("big"))
    reader = MemoryReadingAtomicFlow.instantiate_from_default_config(output_interface=["code_library"],
                                                              retrieval={"enabled": False})  # the summary's cut
    files = {"memory_files": {"code_library": str(path)}}
    reader.run(files)
    before = definition_digests(path.read_text())
    assert len(parses) == 1
    monkeypatch.setattr(builtins, "compile", counting_compile)
    monkeypatch.setattr(ast, "parse", counting_ast_parse)
    save = SaveCodeAtomicFlow.instantiate_from_default_config()
    out = save.run({"code": "def added(x):\n    '''One more.'''\n    return x\n", **files})
    assert out["result"].startswith("Saved added in the code library") and "401 function(s)" in out["result"]
    reader.run(files)
    after = definition_digests(path.read_text())
    assert set(after) - set(before) == {"added"}
    entry = Entry(boss="ExtendLibrary", number=1, when=None, command="save_code", arguments="", result=out["result"])
    assert [name for name, source in added_functions([entry], str(path)) if source] == ["added"]
    large = [p for p in parses if len(p) > 10_000]
    assert len(large) == 2, "the library once before the save, the new one once after"
    assert big == [], "no other parse or compile of the large library"


def test_a_large_library_is_parsed_in_blocks_and_a_save_parses_only_its_last_block(tmp_path, parses):
    """A library of megabytes is parsed block by block (no tree of the whole text: about 100 times its size), and
    the version a save_code makes (the library and one more function) parses only the block that changed."""
    from aiflows_jarvis.ExtendLibraryFlowModule import SaveCodeAtomicFlow

    path = tmp_path / "library.py"
    source = a_library("many", functions=6000)  # about 470 KB
    path.write_text(source)
    reader = MemoryReadingAtomicFlow.instantiate_from_default_config(output_interface=["code_library"],
                                                              retrieval={"enabled": False})  # the summary's cut
    files = {"memory_files": {"code_library": str(path)}}
    summary = reader.run(files)["code_library"]
    assert summary.startswith("(the library is large") and "many_0" in summary
    assert max(map(len, parses)) < 100_000, "the whole library was parsed at once"
    assert sum(map(len, parses)) < 1.2 * len(source)
    parses.clear()
    save = SaveCodeAtomicFlow.instantiate_from_default_config()
    out = save.run({"code": "def added(x):\n    '''One more.'''\n    return x\n", **files})
    assert "6001 function(s)" in out["result"]
    reader.run(files)
    assert sum(map(len, parses)) < 100_000, "the new version parsed more than its last block"
    assert defined_names(path.read_text())[-2:] == ["many_5999", "added"]


def test_blocks_cut_inside_a_statement_are_joined_and_line_numbers_are_the_files():
    """A block may only end where a statement starts: a string, brackets or a decorator spanning the cut join the
    blocks; the names, their lines and the errors are those of the whole file."""
    filler = a_library("fill", functions=300)
    # a string and a list longer than a block, their lines at the first column: a block is cut inside each
    text = 'TEXT = """\n' + "".join(f"def not_a_function_{i}():\n" for i in range(2000)) + '"""\n\n'
    values = "VALUES = [\n" + "".join(f"{i},\n" for i in range(8000)) + "]\n\n"
    tricky = ("@staticmethod\ndef decorated():\n    pass\n\ntry:\n    import json\nexcept ImportError:\n"
              "    json = None\n\n")
    source = "".join(text + filler + values + tricky for _ in range(3))
    assert len(text) > code_library._BLOCK_CHARS and len(values) > code_library._BLOCK_CHARS
    spans = code_library.definition_spans(source)
    import ast

    expected = [(n.name, min([n.lineno] + [d.lineno for d in n.decorator_list]), n.end_lineno)
                for n in ast.parse(source).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    assert spans == expected and "not_a_function_0" not in defined_names(source)
    broken = source + "def broken(:\n"
    with pytest.raises(SyntaxError) as error:
        defined_names(broken)
    assert error.value.lineno == source.count("\n") + 1


def test_a_string_of_a_megabyte_is_not_parsed_again_at_every_block_it_spans(parses):
    source = 'DATA = """\n' + "def looks_like_code():\n" * 50_000 + '"""\n\n' + a_library("after", functions=100)
    assert defined_names(source) == [f"after_{n}" for n in range(100)]
    assert sum(map(len, parses)) < 4 * len(source), "the blocks inside the string were parsed again and again"
