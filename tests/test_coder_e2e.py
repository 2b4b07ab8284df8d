"""Coder end to end through LiteLLMBackend -> litellm -> HTTP (loopback server), with a real kernel.

Like the seed's example run, with the bookkeeping done by code: Coder's plan is its goal (the user approves it),
Coder calls extend_library; ExtendLibrary writes a function (the user edits it in the fake editor), tests it (a
user-given test passes), saves it into the library package (the user keeps the module), marks its plan done, finishes
and is reset; back in Coder, run_code imports the function and keeps a value in a variable, a second run_code uses
that variable and completes the plan's step, and Coder finishes.
"""

from __future__ import annotations

import pytest
from fakes import command, library_text

from aiflows_jarvis.CoderFlowModule import CoderFlow
from aiflows_jarvis.CoreFlowModule import read_text, set_memory_files, split_log_entries

GENERATED = '''Here it is:
```python
def moving_average(values, window):
    """Return the averages of each run of `window` consecutive values.

    Parameters:
    values (list of float): the values.
    window (int): how many consecutive values each average covers.
    """
    return [sum(values[i:i + window]) / window for i in range(len(values) - window + 1)]
```'''
VALIDATION = "    if window <= 0:\\n        raise ValueError('window must be positive')\\n    return ["
USER_TEST = 'assert moving_average([1, 2, 3, 4], 2) == [1.5, 2.5, 3.5]\nprint("checked", moving_average([2, 4], 2))'


def branches(log_path):
    return [entry.split(" ---")[0].split()[-1] for _, entry in split_log_entries(read_text(log_path))]


@pytest.fixture
def coder(tmp_path, loopback_llm):
    flow = CoderFlow.instantiate_from_default_config()
    files = set_memory_files(flow, str(tmp_path), workdir=str(tmp_path))
    yield flow, files
    flow.subflows["CtrlExMem"].subflows["Executor"].subflows["run_code"].subflows["Interpreter"].close()


def test_coder_writes_a_library_function_then_uses_it_in_a_persistent_session(
    tmp_path, coder, loopback_llm, user, fake_editor, monkeypatch
):
    flow, files = coder
    monkeypatch.setenv("FAKE_EDITOR_REPLACE", "    return [=>" + VALIDATION.encode().decode("unicode_escape"))
    user.add(
        "",  # Coder's plan (its goal, one step): approved
        "e",
        "",  # the generated function: edited in the editor, then approved
        lambda prompt, kind: USER_TEST if "Tests for this code?" in prompt else "unexpected question",
        "",  # test results: fine
        "",  # save_code: the module proposed is kept
        "",
        "",  # run_code 1: run it; the result is fine
        "",
        "",  # run_code 2: run it; the result is fine
    )
    extend_library = flow.subflows["CtrlExMem"].subflows["Executor"].subflows["extend_library"]
    seen_after_extend_library = {}

    def first_run_code(request):  # Coder's controller, right after extend_library returned
        seen_after_extend_library["chat"] = list(
            extend_library.subflows["CtrlExMem"].subflows["Controller"].flow_state["previous_messages"]
        )
        seen_after_extend_library["state"] = dict(extend_library.flow_state)
        return command(
            "run_code",
            language="python",
            code="from library import moving_average\naverages = moving_average(list(range(1, 11)), 3)\n"
            "print(len(averages))",
        )

    loopback_llm.add(
        command("extend_library", goal="moving_average(values: list, window: int) -> list of the window averages"),
        GENERATED,  # ExtendLibrary's plan is the function; write_code is its first command, made by code
        command("test"),  # the code writer asks for tests (the user gives them); passed and accepted: saved
        first_run_code,
        command("run_code", language="python", code="print(max(averages))", completes_step=1),
    )

    out = flow.call({"goal": "Write a reusable moving_average function, then use it on 1..10."})

    assert out["status"] == "finished", out
    assert out["summary"] == "Every step of the plan is done.", "the last step done, Coder finished by itself"
    assert "8" in out["result"] and "9.0" in out["result"], "with the results of every command, not the last only"
    # ~~~ files ~~~
    library = library_text(files["CoderFlow"]["code_library"])
    assert (
        "def moving_average(values, window):" in library and "raise ValueError('window must be positive')" in library
    ), "the library holds the function as the user edited it"
    assert (
        read_text(files["CoderFlow"]["plan"]).strip()
        == "1. Write a reusable moving_average function, then use it on 1..10. [done]"
    )
    extlib_files = files["CoderFlow/CtrlExMem/Executor/extend_library"]
    assert read_text(extlib_files["plan"]).strip().endswith("list of the window averages [done]")
    # ~~~ the order of the branches, at both levels ~~~
    assert branches(extlib_files["logs"]) == ["write_code", "save_code", "update_plan"]
    assert branches(files["CoderFlow"]["logs"]) == ["extend_library", "run_code", "run_code", "update_plan"]
    # ~~~ what the LLMs were told ~~~
    requests = [r["messages"] for r in loopback_llm.requests]
    assert len(requests) == 5, "no plan, no choice of the first command, no save, no update, no finish asked for"
    test_chat = requests[2]
    assert [m["role"] for m in test_chat] == ["system", "user"], "the code writer's chat holds no move it never made"
    assert (
        "The user edited the code and approved it" in test_chat[1]["content"]
        and "raise ValueError('window must be positive')" in test_chat[1]["content"]
    ), "it reads the code as it is now"
    assert sum(m["content"].count("moving_average(values: list, window: int)") for m in test_chat) == 1, (
        "the function asked for, once"
    )
    coder_after_extlib = requests[3]
    told = coder_after_extlib[-1]["content"]
    assert "def moving_average(values, window):" in told, "the new library, as a message"
    assert "Return the averages of each run" in told and "range(len(values)" not in told, (
        "signatures and docstrings, not bodies"
    )
    assert "extend_library finished: Saved moving_average in the code library" in told
    assert "8" in requests[4][-1]["content"], "first run_code: the library function ran"
    assert "from library import moving_average" not in requests[4][-1]["content"], "its code is not echoed back"
    # ~~~ the user in the loop: every review is still there ~~~
    opened = fake_editor.read_text().splitlines()
    assert len(opened) == 3 and "code_runs" not in opened[0], "the function was opened in the editor once"
    assert all("/code_runs/run_" in path for path in opened[1:]), "each run_code's file opened in the editor first"
    assert [a["kind"] for a in user.asked] == [
        "approval",
        "approval",
        "approval",
        "feedback",
        "feedback",
        "approval",
        "approval",
        "feedback",
        "approval",
        "feedback",
    ]
    assert "Save moving_average in library/" in user.asked[5]["prompt"], "the module is shown before the save"
    # ~~~ resets: a finished sub-boss drops its chats, at once ~~~
    assert seen_after_extend_library["chat"] == [], "ExtendLibrary's controller chat was dropped when it finished"
    assert (
        "plan" not in seen_after_extend_library["state"]
        and seen_after_extend_library["state"]["status"] == "unfinished"
    ), "ExtendLibrary's state was reset when it finished"
    assert flow.subflows["CtrlExMem"].subflows["Controller"].flow_state["previous_messages"] == [], "Coder too"
