"""The pieces of the Coder stack: save_code, the code tests, code extraction, run_code's review, write_code's
revisions, memory files."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from fakes import Expect, command, finish, last_user_message
from helpers import run_code

from aiflows_jarvis.CoderFlowModule import CoderFlow
from aiflows_jarvis.CodeWriterFlowModule import CodeWriterFlow
from aiflows_jarvis.CoreFlowModule import AutoApproveInput, atomic_write, read_text, set_memory_files
from aiflows_jarvis.ExtendLibraryFlowModule import SaveCodeAtomicFlow
from aiflows_jarvis.InteractiveCodeGenFlowModule import extract_code
from aiflows_jarvis.RunCodeFlowModule import RunCodeFlow
from aiflows_jarvis.TestCodeFlowModule import TestCodeAtomicFlow, TestCodeFlow

F = 'def f(x):\n    """Doubles x."""\n    return 2 * x\n'
G = 'def g(x):\n    """Triples x."""\n    return 3 * x\n'


@pytest.fixture
def library(tmp_path):
    return {"code_library": str(tmp_path / "library.py")}


def library_text(library) -> str:
    """The text of every module of the library package, in order."""
    package = library["code_library"][:-3]
    return "".join(read_text(os.path.join(package, m)) for m in sorted(os.listdir(package)) if m.endswith(".py"))


def test_save_code_appends_functions_and_refuses_silent_redefinition(library):
    save = SaveCodeAtomicFlow.instantiate_from_default_config()
    assert "Saved f" in save.run({"code": F, "memory_files": library})["result"]
    assert "Saved g" in save.run({"code": G, "memory_files": library})["result"]
    refused = save.run({"code": F.replace("2 * x", "x + x"), "memory_files": library})["result"]
    assert refused.startswith("Nothing was saved: the library already defines f") and "replace_existing" in refused
    assert "2 * x" in library_text(library), "nothing was lost"
    replaced = save.run({"code": F.replace("2 * x", "x + x"), "memory_files": library, "replace_existing": True})
    assert replaced["result"].startswith("Replaced f")
    text = library_text(library)
    assert "x + x" in text and "2 * x" not in text and "def g(x):" in text and text.count("def f(") == 1


@pytest.mark.parametrize(
    "code, says",
    [("def broken(:\n  pass", "does not compile"), ("x = 1", "defines no function"), ("", "no code has been written")],
)
def test_save_code_refuses_what_it_cannot_save(library, code, says):
    atomic_write(library["code_library"], F)
    assert (
        says
        in SaveCodeAtomicFlow.instantiate_from_default_config().run({"code": code, "memory_files": library})["result"]
    )
    assert read_text(library["code_library"]) == F


def test_the_code_test_runs_the_users_tests_with_the_library(library):
    atomic_write(library["code_library"], F)
    test = TestCodeAtomicFlow.instantiate_from_default_config()
    ok = test.run(
        {
            "code": G + "\ndef h(x):\n    return f(g(x))\n",
            "user_tests": "assert h(1) == 6\nprint('h ok')",
            "memory_files": library,
        }
    )
    assert ok["passed"] and "the user's tests passed" in ok["result"] and "h ok" in ok["result"]
    bad = test.run({"code": G, "tests": "assert g(2) == 7", "memory_files": library})
    assert not bad["passed"] and "AssertionError" in bad["result"]


def test_the_code_test_checks_imports_anywhere_in_the_code(library):
    code = "def f():\n    import surely_not_a_module_xyz\n    return 1\n"
    out = TestCodeAtomicFlow.instantiate_from_default_config().run({"code": code, "tests": "", "memory_files": library})
    assert not out["passed"] and "not installed: surely_not_a_module_xyz" in out["result"]


def test_the_code_test_reports_syntax_errors(library):
    out = TestCodeAtomicFlow.instantiate_from_default_config().run(
        {"code": "def f(:\n pass", "tests": "", "memory_files": library}
    )
    assert not out["passed"] and out["result"].startswith("Syntax error in the code, line 1")


def test_the_code_test_runs_the_code_as_the_library_would_not_as_a_script(library):
    code = 'def f():\n    return 1\n\nif __name__ == "__main__":\n    raise SystemExit("ran as a script")\n'
    out = TestCodeAtomicFlow.instantiate_from_default_config().run(
        {"code": code, "user_tests": "assert f() == 1", "memory_files": library}
    )
    assert out["passed"], out["result"]


def test_test_code_flow_asks_for_tests_and_feedback(library, user):
    user.add("assert g(3) == 9", "fine")
    out = TestCodeFlow.instantiate_from_default_config().run({"code": G, "memory_files": library})
    assert out["passed"] and out["feedback"] == "fine"
    assert [a["kind"] for a in user.asked] == ["feedback", "feedback"]


def test_proposed_tests_are_shown_run_and_joined_by_the_users(library, user):
    user.add("assert g(0) == 0", "")
    out = TestCodeFlow.instantiate_from_default_config().run(
        {"code": G, "tests": "assert g(3) == 9\nprint('proposed ran')", "memory_files": library}
    )
    assert "Proposed tests:\n    assert g(3) == 9" in user.asked[0]["prompt"], "the proposal first, as code"
    assert out["passed"] and "the proposed and the user's tests passed" in out["result"]
    assert "proposed ran" in out["result"]
    user.add("", "")
    failing = TestCodeFlow.instantiate_from_default_config().run(
        {"code": G, "tests": "assert g(3) == 10", "memory_files": library}
    )
    assert not failing["passed"] and "AssertionError" in failing["result"], "a wrong proposal fails like any test"


def test_in_auto_approve_mode_the_proposed_tests_run(library, run_context):
    from aiflows_jarvis.CoreFlowModule import AutoApproveInput

    run_context.input_source = AutoApproveInput()
    out = TestCodeFlow.instantiate_from_default_config().run(
        {"code": G, "tests": "assert g(3) == 9", "memory_files": library}
    )
    assert out["passed"] and "the proposed tests passed" in out["result"]


@pytest.mark.parametrize(
    "reply, code",
    [
        ("```python\ndef f():\n    pass\n```", "def f():\n    pass"),
        ("Sure:\n```\nx = 1\n```\nand\n```python\ny = 2\n```", "y = 2"),
        ("def f():\n    pass", "def f():\n    pass"),
    ],
)
def test_code_is_extracted_from_a_reply(reply, code):
    assert extract_code(reply) == code


def test_run_code_does_not_run_code_the_user_declines(tmp_path, user):
    user.add("no, print the sum instead")
    flow = RunCodeFlow.instantiate_from_default_config()
    out = flow.run(
        {
            "code": "open('ran.txt', 'w').write('x')",
            "language": "python",
            "memory_files": {"code_library": str(tmp_path / "library.py")},
        }
    )
    assert out["result"] == "The user did not let this code run. Their feedback: no, print the sum instead"
    assert not (tmp_path / "ran.txt").exists()
    runs = os.listdir(tmp_path / "code_runs")
    assert len(runs) == 1 and runs[0].endswith(".py"), "the code was written to a file in the workspace"
    flow.subflows["Interpreter"].close()


def test_run_code_runs_shell_code_in_auto_approve_mode(tmp_path, run_context):
    run_context.input_source = AutoApproveInput()
    out = run_code(tmp_path, "echo hello from bash", "bash")
    assert "hello from bash" in out["result"] and out["feedback"] == ""
    assert os.listdir(tmp_path / "code_runs")[0].endswith(".sh")


def test_set_memory_files_gives_each_boss_its_own_files(tmp_path, scripted_llm):
    coder = CoderFlow.instantiate_from_default_config()
    done = set_memory_files(coder, str(tmp_path))
    assert done["CoderFlow"] == {
        "plan": str(tmp_path / "plan_coder.txt"),
        "logs": str(tmp_path / "logs_coder.txt"),
        "code_library": str(tmp_path / "library.py"),
    }
    assert done["CoderFlow/CtrlExMem/Executor/extend_library"]["plan"] == str(tmp_path / "plan_extlib.txt")
    interpreter = coder.subflows["CtrlExMem"].subflows["Executor"].subflows["run_code"].subflows["Interpreter"]
    assert interpreter.flow_config["workspace"] == os.getcwd(), "code runs where the script runs, as the command line"
    assert interpreter.flow_config["library_dir"] == str(tmp_path), "and `import library` finds the library"


FUTURE = (
    'from __future__ import annotations\n\n\ndef half(x: float) -> float:\n    """Half of x."""\n    return x / 2\n'
)


def test_code_with_a_future_import_is_tested_and_saved(library):
    atomic_write(library["code_library"], F)
    out = TestCodeAtomicFlow.instantiate_from_default_config().run(
        {"code": FUTURE, "tests": "assert half(f(3)) == 3", "memory_files": library}
    )
    assert out["passed"], out["result"]
    saved = SaveCodeAtomicFlow.instantiate_from_default_config().run({"code": FUTURE, "memory_files": library})
    assert saved["result"].startswith("Saved half")
    text = read_text(library["code_library"][:-3] + "/general.py")
    assert text.count("from __future__ import annotations\n") == 1 and "def half" in text
    compile(text, "general.py", "exec")  # the future import comes right after the module's docstring


def test_replacing_a_function_keeps_the_library_as_it_was(library, tmp_path):
    atomic_write(library["code_library"], F)
    SaveCodeAtomicFlow.instantiate_from_default_config().run(
        {"code": F.replace("2 * x", "x + x"), "memory_files": library, "replace_existing": True}
    )
    kept = sorted(p.read_text() for p in (tmp_path / "archive").iterdir() if p.name.startswith("library."))
    assert len(kept) == 1 and F in kept[0], "the replaced definition is not lost"


# ~~~ save_code: nothing that runs on import; refusals are shown ~~~
@pytest.mark.parametrize(
    "code, line, shown",
    [
        (F + "\nprint(f(2))\n", 5, "`print(f(2))`"),
        ('"""Helpers."""\n' + G + "\ng(3)\n", 6, "`g(3)`"),
        (F + "\nfor i in range(3):\n    print(f(i))\n", 5, "`for i in range(3):`"),
        (F + "\nif True:\n    f(1)\n", 6, "`f(1)`"),  # an `if` block's body runs on import too
        (
            "try:\n    import json\nexcept ImportError:\n    json = None\n"
            + G
            + "\nwith open('data.txt', 'w') as out:\n    out.write('x' * 100)\n",
            9,
            "`with open('data.txt', 'w') as out:`",
        ),
    ],
    ids=["print", "call-after-docstring", "loop", "in-an-if", "with-after-conditional-import"],
)
def test_save_code_refuses_statements_that_would_run_on_import(library, quiet_console, code, line, shown):
    atomic_write(library["code_library"], "def keep():\n    return 0\n")
    result = SaveCodeAtomicFlow.instantiate_from_default_config().run({"code": code, "memory_files": library})["result"]
    assert result.startswith(
        "Nothing was saved: the code has top-level statements that would run every time the library is imported"
    ), result
    assert f"line {line}: {shown}" in result, "the controller is told which line and which statement"
    assert "run_code" in result and "write_code" in result, "and what to do instead"
    assert read_text(library["code_library"]) == "def keep():\n    return 0\n", "nothing was written to the library"
    assert result in quiet_console.text, "the refusal is shown on the console, not only returned"


def test_save_code_shortens_a_long_statement_in_its_refusal(library):
    code = F + "\nprint(" + " + ".join(f"f({i})" for i in range(40)) + ")\n"
    result = SaveCodeAtomicFlow.instantiate_from_default_config().run({"code": code, "memory_files": library})["result"]
    assert "line 5: `print(f(0) + f(1)" in result and "f(39)" not in result, "the statement is cut, not copied whole"


LIBRARY_MODULE = '''"""Text helpers."""
import re

try:
    import surely_not_a_module_xyz as fast_json
except ImportError:
    import json as fast_json

WORD = re.compile(r"\\w+")
LIMIT: int = 3


def words(text):
    """The words of text."""
    return WORD.findall(text)[:LIMIT]


if __name__ == "__main__":
    print("demo", words("a b c d"))
'''


def test_save_code_accepts_imports_constants_conditional_imports_and_a_main_guard(library, tmp_path):
    out = SaveCodeAtomicFlow.instantiate_from_default_config().run({"code": LIBRARY_MODULE, "memory_files": library})
    assert out["result"].startswith("Saved words"), out["result"]
    assert LIBRARY_MODULE.split('"""', 2)[2].strip() in library_text(library)
    imported = subprocess.run(
        [sys.executable, "-c", "import library; print(library.words('x y z w'))"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout == "['x', 'y', 'z']\n", "importing the library runs nothing (the __main__ block neither)"


@pytest.mark.parametrize(
    "code, says",
    [
        ("def broken(:\n  pass", "does not compile"),
        (F.replace("2 * x", "x + x"), "already defines f"),
        (G + "\ng(1)\n", "top-level statements"),
    ],
)
def test_every_refusal_of_save_code_is_a_warning_on_the_console(library, quiet_console, code, says):
    atomic_write(library["code_library"], F)
    result = SaveCodeAtomicFlow.instantiate_from_default_config().run({"code": code, "memory_files": library})["result"]
    assert result.startswith("Nothing was saved") and says in result
    shown = quiet_console.text.strip().splitlines()  # (after what moving library.py into library/ said, if it did)
    assert shown[-1] == result, "the user sees the same reason the controller reads"


def test_saving_prints_no_warning(library, quiet_console):
    SaveCodeAtomicFlow.instantiate_from_default_config().run({"code": F, "memory_files": library})
    assert quiet_console.text.startswith("Saved f in ") and "Nothing was saved" not in quiet_console.text


# ~~~ the code test: optional imports ~~~
OPTIONAL_IMPORTS = '''try:
    import surely_not_a_module_xyz as json_impl
except ImportError:
    import json as json_impl


def dump(value):
    """value as JSON, with the fastest module installed."""
    try:
        import surely_not_a_module_abc
    except Exception:
        surely_not_a_module_abc = None
    return json_impl.dumps(value)
'''


def test_imports_with_a_fallback_are_optional_in_the_code_test(library):
    out = TestCodeAtomicFlow.instantiate_from_default_config().run(
        {"code": OPTIONAL_IMPORTS, "tests": "assert dump([1]) == '[1]'", "memory_files": library}
    )
    assert out["passed"], out["result"]
    assert "Optional, not installed: surely_not_a_module_abc, surely_not_a_module_xyz" in out["result"], (
        "missing optional modules (top level and in the function) are mentioned"
    )
    assert "__JARVIS_" not in out["result"], "the script's marks are not shown"


@pytest.mark.parametrize(
    "code",
    [
        # the handler does not catch a failed import: the import is required
        "try:\n    import surely_not_a_module_xyz\nexcept ValueError:\n    pass\n",
        # the import in the handler (the fallback) is required
        "try:\n    import json\nexcept ImportError:\n    import surely_not_a_module_xyz\n",
        # a function defined in a guarded `try` imports when called, outside the `try`
        "try:\n    def load():\n        import surely_not_a_module_xyz\nexcept ImportError:\n    pass\n",
        # a handler that raises again is no fallback
        "try:\n    import surely_not_a_module_xyz\nexcept ImportError:\n    raise ImportError('install it first')\n",
    ],
)
def test_imports_without_a_fallback_are_required_in_the_code_test(library, code):
    out = TestCodeAtomicFlow.instantiate_from_default_config().run({"code": code, "tests": "", "memory_files": library})
    assert not out["passed"] and "not installed: surely_not_a_module_xyz" in out["result"], out["result"]


# ~~~ run_code: the code opens in the editor first ~~~
def test_run_code_opens_the_code_in_the_editor_first_and_runs_the_edited_code(tmp_path, user, fake_editor, monkeypatch):
    monkeypatch.setenv("FAKE_EDITOR_REPLACE", "print('as written')=>print('as edited')")
    user.add("", "")  # run it (after the editor closed); the result is fine
    out = run_code(tmp_path, "print('as written')")
    (opened,) = fake_editor.read_text().splitlines()
    assert os.path.dirname(opened) == str(tmp_path / "code_runs"), "the workspace file opened, without the user's `e`"
    assert out["code"] == "print('as edited')", "the controller gets the code as the user left it"
    assert "as edited" in out["result"] and "as written" not in out["result"], "the edited code is what ran"
    assert read_text(opened) == "print('as edited')"
    assert [a["kind"] for a in user.asked] == ["approval", "feedback"]


def test_run_code_with_open_editor_ask_opens_the_editor_only_on_e(tmp_path, user, fake_editor):
    user.add("", "")
    flow = RunCodeFlow.instantiate_from_default_config(subflows_config={"UserReview": {"open_editor": "ask"}})
    try:
        out = flow.run(
            {
                "code": "print(40 + 2)",
                "language": "python",
                "memory_files": {"code_library": str(tmp_path / "library.py")},
            }
        )
    finally:
        flow.subflows["Interpreter"].close()
    assert "42" in out["result"]
    assert not fake_editor.exists(), "with open_editor: ask, the editor did not open"
    assert "'e' to edit it" in user.asked[0]["prompt"], "but the user was offered it"


# ~~~ write_code: the user comments, the generator revises the current code ~~~
AREA = '```python\ndef area(w: float, h: float) -> float:\n    """Area."""\n    return w * h\n```'
AREA_REVISED = (
    'def area(w: float, h: float) -> float:\n    """Area of a w x h rectangle."""\n'
    '    if w < 0 or h < 0:\n        raise ValueError("negative side")\n    return w * h'
)
COMMENT = "raise ValueError when a side is negative"


def test_a_comment_on_generated_code_sends_the_current_code_back_for_revision(
    library, scripted_llm, user, fake_editor, monkeypatch
):
    monkeypatch.setenv("FAKE_EDITOR_REPLACE", '"""Area."""=>"""Area of a w x h rectangle."""')
    user.add(
        "e",
        COMMENT,  # the first version: edited in the editor, then commented on
        "",
    )  # the revision: approved
    scripted_llm.add(
        Expect("write_code/CodeGenerator", AREA),
        Expect("Controller", command("write_code", goal=f"Revise as the user asked: {COMMENT}")),
        Expect("write_code/CodeGenerator", f"```python\n{AREA_REVISED}\n```"),
        Expect("Controller", finish("area is written")),
    )
    out = CodeWriterFlow.instantiate_from_default_config().run(
        {"goal": "area(w, h) of a rectangle", "memory_files": library}
    )
    generator = [c["messages"] for c in scripted_llm.calls if c["flow"].endswith("CodeGenerator")]
    controller = [c["messages"] for c in scripted_llm.calls if c["flow"].endswith("Controller")]
    assert COMMENT in last_user_message(controller[0]) and "Area of a w x h rectangle." in last_user_message(
        controller[0]
    ), "the controller read the user's comment and the edited code"
    revise = last_user_message(generator[1])
    assert "Area of a w x h rectangle." in revise, "the generator got the current code (as the user edited it)"
    assert "return w * h" in revise and COMMENT in revise
    assert any(m["role"] == "assistant" and "Area." in m["content"] for m in generator[1]), (
        "the revision is asked in the same chat as the first version"
    )
    assert out["status"] == "finished" and out["code"] == AREA_REVISED, "the revised code is what is returned"
