"""The pieces of the Coder stack: save_code, the code tests, code extraction, run_code's review, memory files."""
from __future__ import annotations

import os

import pytest

from flow_modules.aiflows.CoderFlowModule import CoderFlow
from flow_modules.aiflows.CoreFlowModule import AutoApproveInput, set_input_source
from flow_modules.aiflows.CoreFlowModule.memory import atomic_write, read_text, set_memory_files
from flow_modules.aiflows.ExtendLibraryFlowModule import SaveCodeAtomicFlow
from flow_modules.aiflows.InteractiveCodeGenFlowModule import extract_code
from flow_modules.aiflows.RunCodeFlowModule import RunCodeFlow
from flow_modules.aiflows.TestCodeFlowModule import TestCodeAtomicFlow, TestCodeFlow

F = 'def f(x):\n    """Doubles x."""\n    return 2 * x\n'
G = 'def g(x):\n    """Triples x."""\n    return 3 * x\n'


@pytest.fixture
def library(tmp_path):
    return {"code_library": str(tmp_path / "library.py")}


def test_save_code_appends_functions_and_refuses_silent_redefinition(library):
    save = SaveCodeAtomicFlow.instantiate_from_default_config()
    assert "Saved f" in save.run({"code": F, "memory_files": library})["result"]
    assert "Saved g" in save.run({"code": G, "memory_files": library})["result"]
    refused = save.run({"code": F.replace("2 * x", "x + x"), "memory_files": library})["result"]
    assert refused.startswith("Nothing was saved: the library already defines f") and "replace_existing" in refused
    assert "2 * x" in read_text(library["code_library"]), "nothing was lost"
    replaced = save.run({"code": F.replace("2 * x", "x + x"), "memory_files": library, "replace_existing": True})
    assert replaced["result"].startswith("Replaced f")
    text = read_text(library["code_library"])
    assert "x + x" in text and "2 * x" not in text and "def g(x):" in text and text.count("def f(") == 1


@pytest.mark.parametrize("code, says", [("def broken(:\n  pass", "does not compile"),
                                        ("x = 1", "defines no function"), ("", "no code has been written")])
def test_save_code_refuses_what_it_cannot_save(library, code, says):
    atomic_write(library["code_library"], F)
    assert says in SaveCodeAtomicFlow.instantiate_from_default_config().run({"code": code, "memory_files": library})["result"]
    assert read_text(library["code_library"]) == F


def test_the_code_test_runs_the_users_tests_with_the_library(library):
    atomic_write(library["code_library"], F)
    test = TestCodeAtomicFlow.instantiate_from_default_config()
    ok = test.run({"code": G + "\ndef h(x):\n    return f(g(x))\n", "tests": "assert h(1) == 6\nprint('h ok')",
                   "memory_files": library})
    assert ok["passed"] and "the user's tests passed" in ok["result"] and "h ok" in ok["result"]
    bad = test.run({"code": G, "tests": "assert g(2) == 7", "memory_files": library})
    assert not bad["passed"] and "AssertionError" in bad["result"]


def test_the_code_test_checks_imports_anywhere_in_the_code(library):
    code = 'def f():\n    import surely_not_a_module_xyz\n    return 1\n'
    out = TestCodeAtomicFlow.instantiate_from_default_config().run({"code": code, "tests": "", "memory_files": library})
    assert not out["passed"] and "not installed: surely_not_a_module_xyz" in out["result"]


def test_the_code_test_reports_syntax_errors(library):
    out = TestCodeAtomicFlow.instantiate_from_default_config().run(
        {"code": "def f(:\n pass", "tests": "", "memory_files": library})
    assert not out["passed"] and out["result"].startswith("Syntax error in the code, line 1")


def test_test_code_flow_asks_for_tests_and_feedback(library, user):
    user.add("assert g(3) == 9", "fine")
    out = TestCodeFlow.instantiate_from_default_config().run({"code": G, "memory_files": library})
    assert out["passed"] and out["feedback"] == "fine"
    assert [a["kind"] for a in user.asked] == ["feedback", "feedback"]


@pytest.mark.parametrize("reply, code", [
    ("```python\ndef f():\n    pass\n```", "def f():\n    pass"),
    ("Sure:\n```\nx = 1\n```\nand\n```python\ny = 2\n```", "y = 2"),
    ("def f():\n    pass", "def f():\n    pass"),
])
def test_code_is_extracted_from_a_reply(reply, code):
    assert extract_code(reply) == code


def test_run_code_does_not_run_code_the_user_declines(tmp_path, user):
    user.add("no, print the sum instead")
    flow = RunCodeFlow.instantiate_from_default_config()
    out = flow.run({"code": "open('ran.txt', 'w').write('x')", "language": "python",
                    "memory_files": {"code_library": str(tmp_path / "library.py")}})
    assert out["result"] == "The user did not let this code run. Their feedback: no, print the sum instead"
    assert not (tmp_path / "ran.txt").exists()
    runs = os.listdir(tmp_path / "code_runs")
    assert len(runs) == 1 and runs[0].endswith(".py"), "the code was written to a file in the workspace"
    flow.subflows["Interpreter"].close()


def test_run_code_runs_shell_code_in_auto_approve_mode(tmp_path):
    set_input_source(AutoApproveInput())
    flow = RunCodeFlow.instantiate_from_default_config()
    try:
        out = flow.run({"code": "echo hello from bash", "language": "bash",
                        "memory_files": {"code_library": str(tmp_path / "library.py")}})
    finally:
        flow.subflows["Interpreter"].close()
    assert "hello from bash" in out["result"] and out["feedback"] == ""
    assert os.listdir(tmp_path / "code_runs")[0].endswith(".sh")


def test_set_memory_files_gives_each_boss_its_own_files(tmp_path, scripted_llm):
    coder = CoderFlow.instantiate_from_default_config()
    done = set_memory_files(coder, str(tmp_path))
    assert done["CoderFlow"] == {"plan": str(tmp_path / "plan_coder.txt"), "logs": str(tmp_path / "logs_coder.txt"),
                                 "code_library": str(tmp_path / "library.py")}
    assert done["CoderFlow/CtrlExMem/Executor/extend_library"]["plan"] == str(tmp_path / "plan_extlib.txt")
    interpreter = coder.subflows["CtrlExMem"].subflows["Executor"].subflows["run_code"].subflows["Interpreter"]
    assert interpreter.flow_config["workspace"] == str(tmp_path)


FUTURE = 'from __future__ import annotations\n\n\ndef half(x: float) -> float:\n    """Half of x."""\n    return x / 2\n'


def test_code_with_a_future_import_is_tested_and_saved(library):
    atomic_write(library["code_library"], F)
    out = TestCodeAtomicFlow.instantiate_from_default_config().run(
        {"code": FUTURE, "tests": "assert half(f(3)) == 3", "memory_files": library})
    assert out["passed"], out["result"]
    saved = SaveCodeAtomicFlow.instantiate_from_default_config().run({"code": FUTURE, "memory_files": library})
    assert saved["result"].startswith("Saved half")
    text = read_text(library["code_library"])
    assert text.startswith("from __future__ import annotations\n") and text.count("__future__") == 1
    compile(text, "library.py", "exec")


def test_replacing_a_function_keeps_the_library_as_it_was(library, tmp_path):
    atomic_write(library["code_library"], F)
    SaveCodeAtomicFlow.instantiate_from_default_config().run(
        {"code": F.replace("2 * x", "x + x"), "memory_files": library, "replace_existing": True})
    (kept,) = (tmp_path / "archive").iterdir()
    assert kept.read_text() == F, "the replaced definition is not lost"
