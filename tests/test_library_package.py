"""The code library as a package of topic modules: migration of a single `library.py`, `import library` of every
earlier function, names that clash across modules, what a save reads and writes, a save killed at any point, and the
entries and structure the prompts (and retrieval) read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from aiflows_jarvis.CodeLibraryFlowModule import library_entries, library_structure, load_index, package_summary
from aiflows_jarvis.CodeLibraryFlowModule import package as package_module
from aiflows_jarvis.CodeLibraryFlowModule import save as save_module
from aiflows_jarvis.ExtendLibraryFlowModule import SaveCodeAtomicFlow
from aiflows_jarvis.MemoryReadingFlowModule import MemoryReadingAtomicFlow

LEGACY = textwrap.dedent('''\
    """My library."""
    from __future__ import annotations

    import math
    import re

    WORD = re.compile(r"\\w+")
    SCALE = 2


    def count_words(text: str) -> int:
        """Counts the words of a text."""
        return len(WORD.findall(text))


    # growth of a series
    def growth_rates(values):
        """Month-over-month growth rates in percent."""
        return [round((b - a) / a * 100, 1) for a, b in zip(values, values[1:])]


    def largest_growth(values):
        """Index of the month with the largest growth (uses count_words, of another topic)."""
        rates = growth_rates(values)
        return rates.index(max(rates)) + 1 + count_words("")


    def circle_area(r):
        """Area of a circle (maths)."""
        return math.pi * r * r * SCALE / 2


    class Shape:
        """A shape."""

        def area(self) -> float:
            return 0.0
    ''')

USES = textwrap.dedent("""\
    import library
    from library import count_words, growth_rates, largest_growth, circle_area, Shape, WORD
    assert count_words("a b c") == 3
    assert growth_rates([100, 110]) == [10.0]
    assert largest_growth([1, 2, 4, 5]) == 1
    assert abs(library.circle_area(1) - 3.14159) < 0.001
    assert Shape().area() == 0.0 and WORD.pattern
    assert {"Shape", "WORD", "SCALE", "circle_area", "count_words"} <= set(library.__all__)
    print("ok")
    """)


def run_python(folder, code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(folder)}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=str(folder), env=env, capture_output=True, text=True, timeout=120
    )


def save(memory, code: str, **args) -> str:
    flow = SaveCodeAtomicFlow.instantiate_from_default_config()
    return flow.run({"code": code, "memory_files": {"code_library": str(memory / "library.py")}, **args})["result"]


def test_a_single_file_library_is_migrated_on_first_use_and_every_function_still_imports(tmp_path):
    (tmp_path / "library.py").write_text(LEGACY)
    reader = MemoryReadingAtomicFlow.instantiate_from_default_config(output_interface=["code_library"])
    summary = reader.run({"memory_files": {"code_library": str(tmp_path / "library.py")}})["code_library"]
    assert not (tmp_path / "library.py").exists()
    archived = list((tmp_path / "archive").iterdir())
    assert len(archived) == 1 and archived[0].read_text() == LEGACY, "the original is kept whole in the archive"
    modules = {m["module"] for m in library_structure(str(tmp_path / "library.py"))}
    assert {"text", "data", "maths"} <= modules, modules
    assert "# library/data.py" in summary and "def growth_rates(values):" in summary
    assert "- data: Data: tables" in summary, "the structure: one line per module"
    done = run_python(tmp_path, USES)
    assert done.stdout.strip() == "ok", done.stderr
    data = (tmp_path / "library" / "data.py").read_text()
    assert "from .text import count_words" in data, "a function of another module is imported"
    assert data.index("def largest_growth") < data.index("from .text import"), "after the module's definitions"


def test_a_library_py_that_does_not_compile_is_left_as_it_is_and_said(tmp_path):
    (tmp_path / "library.py").write_text("def broken(:\n    pass\n")
    reader = MemoryReadingAtomicFlow.instantiate_from_default_config(output_interface=["code_library"])
    summary = reader.run({"memory_files": {"code_library": str(tmp_path / "library.py")}})["code_library"]
    assert "does not compile (line 1" in summary and "fix it" in summary
    assert (tmp_path / "library.py").read_text() == "def broken(:\n    pass\n"
    assert "Nothing was saved" in save(tmp_path, "def f():\n    return 1\n")


def test_a_library_py_written_beside_the_package_is_moved_in_without_losing_either(tmp_path):
    save(tmp_path, "def growth_rates(v):\n    '''Growth.'''\n    return v\n")
    (tmp_path / "library.py").write_text("def growth_rates(v):\n    return 0\n\n\ndef slugify(t):\n    return t\n")
    assert [e["name"] for e in library_entries(str(tmp_path / "library.py"))] == ["growth_rates", "slugify"]
    assert "return v" in (tmp_path / "library" / "data.py").read_text(), "the package's definition is kept"
    assert any("return 0" in p.read_text() for p in (tmp_path / "archive").iterdir()), "the other is archived"


def test_names_clash_across_modules_and_a_replacement_moves_the_definition(tmp_path):
    assert "module text" in save(tmp_path, "def slugify(t):\n    return t\n", module="text")
    refused = save(tmp_path, "def slugify(t):\n    return t.lower()\n", module="web")
    assert refused.startswith("Nothing was saved") and "slugify (in library/text.py)" in refused
    assert "replace_existing" in refused
    assert not (tmp_path / "library" / "web.py").exists()
    replaced = save(tmp_path, "def slugify(t):\n    return t.lower()\n", module="web", replace_existing=True)
    assert replaced.startswith("Replaced slugify") and "module web" in replaced
    assert "def slugify" not in (tmp_path / "library" / "text.py").read_text()
    assert "t.lower()" in (tmp_path / "library" / "web.py").read_text()
    assert any(p.name.startswith("library.text-") for p in (tmp_path / "archive").iterdir())
    assert run_python(tmp_path, "from library import slugify; print(slugify('AB'))").stdout.strip() == "ab"
    bad = save(tmp_path, "def other(t):\n    return t\n", module="slugify")
    assert bad.startswith("Nothing was saved") and "cannot also name a module" in bad
    assert save(tmp_path, "def g():\n    return 1\n", module="Bad Name").startswith("Nothing was saved: `bad name`")


def test_a_function_named_like_a_module_is_refused_and_another_name_proposed(tmp_path):
    """A name is a module's or a definition's, never both: `from library import data` would give the module or the
    function depending on what was imported first. Either order is refused, by one check."""
    assert "module data" in save(tmp_path, "def growth(v):\n    '''Growth.'''\n    return v\n", module="data")
    refused = save(tmp_path, "def data(points):\n    '''Points of a chart.'''\n    return points\n", module="charts")
    assert refused.startswith("Nothing was saved") and "library/data.py" in refused, refused
    assert "`chart_data`" in refused and "write_code" in refused, "another name is proposed"
    assert not (tmp_path / "library" / "charts.py").exists()
    by_topic = save(tmp_path, "def data(points):\n    '''Points of a chart.'''\n    return points\n")
    assert by_topic.startswith("Nothing was saved") and "library/data.py" in by_topic, "its topic's module too"
    assert "module charts" in save(tmp_path, "def chart_data(points):\n    return points\n", module="charts")
    assert (
        run_python(
            tmp_path, "from library import data, chart_data; print(data.__name__, chart_data([1]))"
        ).stdout.strip()
        == "library.data [1]"
    )


def test_a_save_reads_and_writes_only_the_module_it_changes(tmp_path, monkeypatch):
    package = tmp_path / "library"
    for topic in range(10):  # 2,000 functions in 10 modules, indexed
        body = "".join(f"def f_{topic}_{n}(x):\n    '''Adds {n}.'''\n    return x + {n}\n\n\n" for n in range(200))
        save(tmp_path, body, module=f"topic_{topic}")
    assert len(load_index(str(package))["names"]) == 2000
    touched = {"read": [], "written": [], "parsed": []}
    for module in (package_module, save_module):
        real_read, real_write = module.read_text, module.atomic_write
        monkeypatch.setattr(module, "read_text", lambda p, r=real_read: touched["read"].append(p) or r(p))
        monkeypatch.setattr(module, "atomic_write", lambda p, t, w=real_write: touched["written"].append(p) or w(p, t))
    real_entries = package_module.entries_of_source
    counting = lambda s, r=real_entries: touched["parsed"].append(len(s)) or r(s)  # noqa: E731
    monkeypatch.setattr(package_module, "entries_of_source", counting)
    monkeypatch.setattr(save_module, "entries_of_source", counting)
    result = save(tmp_path, "def added(x):\n    '''One more.'''\n    return f_3_1(x)\n", module="topic_7")
    assert result.startswith("Saved added") and "2001 name(s)" in result
    python = lambda paths: sorted({os.path.relpath(p, package) for p in paths if p.endswith(".py")})  # noqa: E731
    assert python(touched["read"]) == ["topic_7.py"], "another module was read"
    assert python(touched["written"]) == ["topic_7.py"], "another module was written"
    assert sorted(os.path.basename(p) for p in touched["written"] if p.endswith(".json")) == [
        "names.json",
        "topic_7.json",
    ], touched["written"]
    assert max(touched["parsed"]) < 200, "more than the saved code was indexed (its module of 200 functions was)"
    assert "from .topic_3 import f_3_1" in (package / "topic_7.py").read_text()
    assert run_python(tmp_path, "from library import added; print(added(1))").stdout.strip() == "2"


_KILLED_SAVE = textwrap.dedent("""\
    import os, sys
    from aiflows_jarvis.CodeLibraryFlowModule import save as save_module
    from aiflows_jarvis.ExtendLibraryFlowModule import SaveCodeAtomicFlow
    if sys.argv[2] == "between":  # killed after the module is written, before its index
        save_module.write_index = lambda *a, **k: os.kill(os.getpid(), 9)
    flow = SaveCodeAtomicFlow.instantiate_from_default_config()
    files = {"code_library": os.path.join(sys.argv[1], "library.py")}
    for n in range(10_000):
        out = flow.run({"code": f"def saved_{n}(x):\\n    '''Number {n}.'''\\n    return x + {n}\\n",
                        "memory_files": files, "module": f"m{n % 3}"})["result"]
        print(out.split(" in the code library")[0], flush=True)
    """)


def test_a_save_killed_between_the_module_and_its_index_loses_nothing(tmp_path):
    save(tmp_path, "def first(x):\n    return x\n", module="m0")
    child = subprocess.run(
        [sys.executable, "-c", _KILLED_SAVE, str(tmp_path), "between"], capture_output=True, text=True, timeout=120
    )
    assert child.returncode == -signal.SIGKILL and child.stdout == ""
    names = [e["name"] for e in library_entries(str(tmp_path / "library.py"))]
    assert names == ["first", "saved_0"], "the module newer than its index is indexed again"
    done = run_python(tmp_path, "from library import first, saved_0; print(saved_0(1))")
    assert done.stdout.strip() == "1", done.stderr


def test_saves_killed_at_any_moment_lose_no_function_reported_saved(tmp_path):
    for attempt in range(3):
        child = subprocess.Popen(
            [sys.executable, "-c", _KILLED_SAVE, str(tmp_path), "any"], stdout=subprocess.PIPE, text=True
        )
        reported = [child.stdout.readline().strip() for _ in range(5 + 7 * attempt)]
        child.kill()
        child.wait()
        rest = child.stdout.read().split("\n")
        child.stdout.close()
        saved = {line.split()[1] for line in reported + rest if line.startswith("Saved")}
        names = {e["name"] for e in library_entries(str(tmp_path / "library.py"))}
        assert saved <= names, f"reported saved but missing: {saved - names}"
        check = "import library; [getattr(library, n) for n in library.__all__]; print(len(library.__all__))"
        done = run_python(tmp_path, check)
        assert done.returncode == 0 and int(done.stdout) == len(names), done.stderr
        index = json.loads((tmp_path / "library" / "_index" / "names.json").read_text())
        assert set(index["names"]) == names


def test_entries_and_structure_are_read_from_the_index_and_kept_while_nothing_changes(tmp_path, monkeypatch):
    save(tmp_path, "def slugify(text: str) -> str:\n    '''Makes a slug.\n\n    Lowercase.'''\n    return text\n")
    save(tmp_path, "class Chart:\n    '''An SVG chart.'''\n    def draw(self, path):\n        '''Draws it.'''\n")
    where = str(tmp_path / "library.py")
    entries = library_entries(where)
    assert [(e["module"], e["name"], e["kind"]) for e in entries] == [
        ("text", "slugify", "function"),
        ("charts", "Chart", "class"),
    ]
    assert entries[0]["signature"] == "def slugify(text: str) -> str:" and entries[0]["doc"].endswith("Lowercase.")
    assert entries[1]["methods"] == [["def draw(self, path):", "Draws it."]]
    assert [s["module"] for s in library_structure(where)] == ["text", "charts"]
    parsed = []
    monkeypatch.setattr(
        package_module,
        "entries_of_source",
        lambda s: parsed.append(s) or (_ for _ in ()).throw(AssertionError("parsed")),
    )
    assert library_entries(where) == entries and library_entries(str(tmp_path / "library")) == entries
    assert parsed == []
    chosen = package_summary(where, 4000, chosen=[("charts", "Chart")])
    assert "class Chart:" in chosen and "def slugify" not in chosen and "- text:" in chosen


def test_a_module_edited_by_hand_is_indexed_again_and_imports(tmp_path):
    save(tmp_path, "def slugify(t):\n    return t\n")
    library_entries(str(tmp_path / "library.py"))
    with open(tmp_path / "library" / "text.py", "a") as f:
        f.write("\n\ndef shout(t):\n    '''Upper case.'''\n    return t.upper()\n")
    assert run_python(tmp_path, "from library import shout; print(shout('a'))").stdout.strip() == "A"
    assert [e["name"] for e in library_entries(str(tmp_path / "library.py"))] == ["slugify", "shout"]
    summary = package_summary(str(tmp_path / "library.py"), 2000)
    assert "def shout(t):" in summary


@pytest.mark.parametrize(
    "damage, why",
    [
        (b'{"version": 1, "modules": {"text": "\xe9"}}', "not UTF-8"),  # a Latin-1 byte
        (b'{"version": 1, "modules": {"te', "not JSON"),  # cut by a kill
        (b'{"version": 1, "modules": 5, "names": []}', "not an index"),
        (b"", "empty"),
    ],
)
def test_a_names_index_that_does_not_read_is_rebuilt_from_the_modules_and_said(tmp_path, quiet_console, damage, why):
    save(tmp_path, "def slugify(t):\n    '''Slug.'''\n    return t\n")
    save(tmp_path, "def growth(v):\n    '''Growth.'''\n    return v\n", module="data")
    names = tmp_path / "library" / "_index" / "names.json"
    names.write_bytes(damage)
    quiet_console.text = ""
    assert [e["name"] for e in library_entries(str(tmp_path / "library.py"))] == ["growth", "slugify"]
    assert json.loads(names.read_text())["names"] == {"growth": "data", "slugify": "text"}, "written again"
    said = [line for line in quiet_console.text.splitlines() if "names.json" in line]
    assert len(said) == 1 and why in said[0] and "built again" in said[0], quiet_console.text
    library_entries(str(tmp_path / "library.py"))
    assert quiet_console.text.count("names.json") == 1, "said once"


@pytest.mark.parametrize(
    "damage, why",
    [
        (b"", "empty"),
        (b"\xff\x00 garbage", "not UTF-8"),
        (b"\x00\x01 garbage", "not JSON"),
        (b'{"entries": [{"name": 3}]}', "not an index"),
        (b'{"entries": []}', "does not match"),  # valid, but not what the module defines
    ],
)
def test_a_module_index_that_is_garbage_or_empty_is_rebuilt_and_said(tmp_path, quiet_console, damage, why):
    body = "".join(
        f"def tide_{n}(hour):\n    '''The tide at harbour {n}.'''\n    return hour\n\n\n" for n in range(200)
    )
    save(tmp_path, body, module="tides")
    save(tmp_path, "def slugify(t):\n    return t\n", module="text")
    (tmp_path / "library" / "_index" / "tides.json").write_bytes(damage)
    quiet_console.text = ""
    library = str(tmp_path / "library.py")
    assert len([e for e in library_entries(library) if e["module"] == "tides"]) == 200, "no function vanishes"
    assert "def tide_199(hour):" in package_summary(library)
    said = [line for line in quiet_console.text.splitlines() if "tides.json" in line]
    assert len(said) == 1 and why in said[0] and "built again" in said[0], quiet_console.text
    assert len(json.loads((tmp_path / "library" / "_index" / "tides.json").read_text())["entries"]) == 200
    library_entries(library)
    assert quiet_console.text.count("tides.json") == 1, "said once"


def test_a_module_index_changed_during_a_run_is_not_taken_as_it_is(tmp_path, quiet_console):
    save(tmp_path, "def slugify(t):\n    return t\n\n\ndef shout(t):\n    return t\n", module="text")
    library = str(tmp_path / "library.py")
    assert len(library_entries(library)) == 2
    index = tmp_path / "library" / "_index" / "text.json"
    same_size = index.read_bytes().replace(b'"slugify"', b'"sluggo!"')  # valid, not the module's
    index.write_bytes(same_size)
    assert [e["name"] for e in package_module.module_entries(str(tmp_path / "library"), "text")] == ["slugify", "shout"]
    index.write_bytes(b'{"entries": []}')
    assert [e["name"] for e in package_module.module_entries(str(tmp_path / "library"), "text")] == ["slugify", "shout"]
    assert quiet_console.text.count("text.json") == 2 and "does not match" in quiet_console.text, quiet_console.text


def test_the_module_is_shown_to_the_user_who_can_change_it(tmp_path, user):
    flow = SaveCodeAtomicFlow.instantiate_from_default_config(confirm_module=True)
    files = {"code_library": str(tmp_path / "library.py")}
    user.add("my_tools", "")
    out = flow.run({"code": "def slugify(t):\n    return t\n", "memory_files": files})["result"]
    assert "library/text.py (a new module)" in user.asked[0]["prompt"] and "module my_tools" in out
    out = flow.run({"code": "def shout(t):\n    return t\n", "memory_files": files, "module": "my_tools"})["result"]
    assert "library/my_tools.py (an existing module)" in user.asked[1]["prompt"] and "module my_tools" in out
    user.add("please rename it first")
    out = flow.run({"code": "def other(t):\n    return t\n", "memory_files": files})["result"]
    assert out == "Nothing was saved: the user said: please rename it first"


def test_the_default_module_follows_the_topic_and_a_full_module_continues_in_the_next(tmp_path, monkeypatch):
    assert save_module.topic_of("svg_bar_chart") == "charts"
    assert save_module.topic_of("growth_rates", "Growth in percent.") == "data"
    assert save_module.topic_of("frobnicate") == "general"
    monkeypatch.setattr(save_module, "MAX_MODULE_ENTRIES", 2)
    for n in range(3):
        save(tmp_path, f"def chart_{n}(v):\n    return v\n")
    assert [s["module"] for s in library_structure(str(tmp_path / "library.py"))] == ["charts", "charts_2"]


@pytest.mark.parametrize("legacy", [True, False])
def test_an_empty_library_reads_as_nothing(tmp_path, legacy):
    if legacy:
        (tmp_path / "library.py").write_text("")
    assert package_summary(str(tmp_path / "library.py"), 2000) == ""
    assert (tmp_path / "library" / "__init__.py").exists() and not (tmp_path / "library.py").exists()


_KILLED_MIGRATION = """
import os, sys
from aiflows_jarvis.CodeLibraryFlowModule import save as save_module
if sys.argv[2] == "before_rename":
    save_module.os.rename = lambda *a: os.kill(os.getpid(), 9)
else:  # the package is in place, library.py is neither archived nor removed yet
    save_module.archive_copy = lambda *a: os.kill(os.getpid(), 9)
save_module.migrate_library(os.path.join(sys.argv[1], "library"))
"""


@pytest.mark.parametrize("point", ["before_rename", "after_rename"])
def test_a_migration_killed_at_any_point_is_finished_by_the_next_use(tmp_path, point):
    (tmp_path / "library.py").write_text(LEGACY)
    child = subprocess.run(
        [sys.executable, "-c", _KILLED_MIGRATION, str(tmp_path), point], capture_output=True, text=True, timeout=120
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert (tmp_path / "library.py").read_text() == LEGACY, "the original is still there"
    names = [e["name"] for e in library_entries(str(tmp_path / "library.py"))]
    assert sorted(n for n in names if n[0].islower() or n == "Shape") == [
        "Shape",
        "circle_area",
        "count_words",
        "growth_rates",
        "largest_growth",
    ]
    assert not (tmp_path / "library.py").exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".library-migrating-")], "the staging folder is left"
    assert any(p.read_text() == LEGACY for p in (tmp_path / "archive").iterdir())
    assert run_python(tmp_path, USES).stdout.strip() == "ok"


def test_importing_the_library_beside_a_fifo_for_its_index_does_not_block(tmp_path):
    """`import library` (the kernel's, or a script's) reads names.json without waiting for a FIFO's writer."""
    save(tmp_path, "def shout(t):\n    return t.upper()\n")
    names = tmp_path / "library" / "_index" / "names.json"
    names.unlink()
    os.mkfifo(names)
    done = run_python(tmp_path, "from library import shout; print(shout('a'))")  # (a blocked open: TimeoutExpired)
    assert done.stdout.strip() == "A", done.stderr


BROKEN = "def bar_chart(values):\n    '''Bars.'''\n    return (values\n"


def test_a_module_that_does_not_compile_is_said_once_on_the_console(tmp_path, quiet_console):
    save(tmp_path, "def slugify(t):\n    return t\n", module="text")
    (tmp_path / "library" / "charts.py").write_text(BROKEN)
    reader = MemoryReadingAtomicFlow.instantiate_from_default_config(output_interface=["code_library"])
    files = {"memory_files": {"code_library": str(tmp_path / "library.py")}}
    summary = reader.run(files)["code_library"]
    assert "charts: (does not parse: line 3" in summary, "the prompt says it"
    reader.run(files)
    save(tmp_path, "def shout(t):\n    return t\n", module="text")  # (a new version of the index)
    reader.run(files)
    said = [line for line in quiet_console.text.splitlines() if "charts.py" in line and "compile" in line]
    assert len(said) == 1 and "line 3" in said[0], quiet_console.text


def test_importing_a_function_of_a_module_that_does_not_compile_names_the_module_and_line(tmp_path):
    from aiflows_jarvis.InterpreterFlowModule.executor import library_loader_code

    save(tmp_path, "def slugify(t):\n    return t\n", module="text")
    (tmp_path / "library" / "charts.py").write_text(BROKEN)
    library_structure(str(tmp_path / "library.py"))  # (indexed: the module's error recorded, no names)
    for loader in ("", library_loader_code("library")):  # as a script imports it, and as the kernel does
        done = run_python(tmp_path, loader + "\nfrom library import bar_chart\n")
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith("ImportError") and "library/charts.py" in last and "line 3" in last, done.stderr
        other = run_python(tmp_path, loader + "\nfrom library import slugify\n")
        assert other.returncode == 0, "the other modules still import: " + other.stderr


def test_a_module_with_a_latin_1_byte_is_reported_and_skipped_as_one_that_does_not_parse(tmp_path, quiet_console):
    from aiflows_jarvis.InterpreterFlowModule.executor import library_loader_code

    save(tmp_path, "def slugify(t):\n    return t\n", module="text")
    latin = b"def bar_chart(values):\n    '''Barres du caf\xe9.'''\n    return values\n"
    (tmp_path / "library" / "charts.py").write_bytes(latin)
    reader = MemoryReadingAtomicFlow.instantiate_from_default_config(output_interface=["code_library"])
    summary = reader.run({"memory_files": {"code_library": str(tmp_path / "library.py")}})["code_library"]
    assert "def slugify(t):" in summary, "the other modules are read"
    assert "charts: (does not parse: not UTF-8 text (byte 0xe9 at line 2" in summary, summary
    said = [line for line in quiet_console.text.splitlines() if "charts.py" in line]
    assert len(said) == 1 and "not UTF-8" in said[0] and "line 2" in said[0], quiet_console.text
    assert save(tmp_path, "def shout(t):\n    return t\n", module="text").startswith("Saved shout")
    refused = save(tmp_path, "def pie_chart(v):\n    return v\n", module="charts")
    assert refused.startswith("Nothing was saved") and "not UTF-8" in refused and "library/charts.py" in refused
    for loader in ("", library_loader_code("library")):
        last = run_python(tmp_path, loader + "\nfrom library import bar_chart\n").stderr.strip().splitlines()[-1]
        assert last.startswith("ImportError") and "library/charts.py" in last and "not UTF-8" in last, last
    assert (tmp_path / "library" / "charts.py").read_bytes() == latin, "the module is left as it is"


# ~~~ Migrating a large library.py: linear, and said ~~~
def _profile_events(call) -> int:
    """How many calls (Python and C) ``call()`` makes: a count of work that does not depend on the machine's load."""
    count = [0]

    def profiler(frame, event, arg):
        count[0] += 1

    sys.setprofile(profiler)
    try:
        call()
    finally:
        sys.setprofile(None)
    return count[0]


def _constants(count: int) -> str:
    return "".join(
        f"RATE_{n} = {n} * 0.01\n\n\ndef tool_{n}(values):\n    '''Tool {n}.'''\n"
        f"    return [v * RATE_{n} for v in values]\n\n\n"
        for n in range(count)
    )


def test_indexing_a_module_of_many_constants_is_linear_in_its_size():
    """ast.get_source_segment splits the whole source at each call: one per constant made a module of 25,000
    constants cost minutes to index (a 5 MB library.py took 96 s to migrate)."""
    small, large = (_profile_events(lambda n=n: package_module.entries_of_source(_constants(n))) for n in (300, 600))
    assert large < 2.5 * small, f"{small} calls for 300 constants, {large} for 600: not linear"


def _lines_run_in(function, call) -> int:
    """How many lines of ``function`` itself ``call()`` runs (a count of its work, whatever the machine's load)."""
    count = [0]
    code = function.__code__

    def local(frame, event, arg):
        if event == "line":
            count[0] += 1
        return local

    sys.settrace(lambda frame, event, arg: local if frame.f_code is code else None)
    try:
        call()
    finally:
        sys.settrace(None)
    return count[0]


def test_planning_a_migration_is_linear_in_the_librarys_size():
    """Each statement that is not a definition was matched against every module until nothing changed: with a
    constant per function, statements x modules grew as the square of the library."""
    small, large = (
        _lines_run_in(save_module.plan_migration, lambda n=n: save_module.plan_migration(_constants(n), {}))
        for n in (1000, 2000)
    )
    assert large < 2.5 * small, f"{small} lines run for 1,000 functions, {large} for 2,000: not linear"


def test_a_migration_says_what_it_moves_where_the_original_goes_and_how_far_it_is(tmp_path, quiet_console, monkeypatch):
    from aiflows_jarvis.CoreFlowModule.console import interaction

    monkeypatch.setattr(interaction, "PROGRESS_EVERY", 0)  # (a line at every step: this library moves quickly)
    (tmp_path / "library.py").write_text(_constants(2000))  # about 220 KB: several blocks
    assert len(library_entries(str(tmp_path / "library.py"))) == 4000
    said = quiet_console.text.splitlines()
    assert said[0].startswith(f"Moving {tmp_path / 'library.py'} (0.2 MB) into the library package"), said[:2]
    assert f"kept in {tmp_path / 'archive'}" in said[0], "where the original goes"
    assert any("MB read" in line for line in said[1:-1]) and any("modules indexed" in line for line in said[1:-1])
    (copy,) = (tmp_path / "archive").iterdir()
    assert said[-1].startswith("Moved 2000 functions and classes of library.py into ") and str(copy) in said[-1], said[
        -1
    ]
