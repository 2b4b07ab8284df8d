"""Controllers' prompts laid out for prefix caches (ChatFlowModule/layout.py): a head that never changes, memory
changes appended as messages, the chat rebuilt in blocks."""

from __future__ import annotations

import json

from fakes import command

from aiflows_jarvis.ControllerFlowModule import ControllerAtomicFlow
from aiflows_jarvis.CoreFlowModule import format_log_entry

COMMANDS = {
    "ask_user": {"description": "ask", "input_args": ["question"]},
    "run_code": {"description": "run", "input_args": ["code"]},
    "re_plan": {"description": "plan again", "input_args": ["goal"]},
}
FILES = {"plan": "/memory/plan.txt", "logs": "/memory/logs.txt"}


def controller(**overrides):
    return ControllerAtomicFlow.instantiate_from_default_config(commands=COMMANDS, **overrides)


def entry(number, name, result="ok"):
    return format_log_entry(number, name, {}, result, when=0).rstrip("\n")


def data(plan="1. ask", logs="", result=None, **more):
    out = {"goal": "learn the user's colour", "plan": plan, "logs": logs, "memory_files": FILES, **more}
    if result is not None:
        out["result"] = result
    return out


def test_each_call_begins_with_the_previous_one_and_a_new_plan_comes_as_a_message(scripted_llm):
    flow = controller()
    scripted_llm.add(
        command("ask_user", question="Colour?"),
        command("ask_user", question="Shade?"),
        command("ask_user", question="Why?"),
    )
    flow.run(data())
    flow.run(data(logs=entry(1, "ask_user"), result="blue"))
    flow.run(
        data(
            plan="1. ask [done]\n2. ask the shade",
            logs=entry(1, "ask_user") + "\n" + entry(2, "ask_user"),
            result="navy",
        )
    )
    first, second, third = (c["messages"] for c in scripted_llm.calls)
    assert second[: len(first)] == first and third[: len(second)] == second, "append only, byte for byte"
    assert second[-1]["content"] == "Here is the result of your previous command:\nblue", (
        "nothing else changed: the entry of its own command is not repeated"
    )
    assert third[-1]["content"].endswith("The plan is now:\n1. ask [done]\n2. ask the shade"), (
        "the controller is told of the new plan by a message"
    )
    assert third[0]["content"] == first[0]["content"] and "1. ask" not in first[0]["content"].split("commands")[0]


def test_log_entries_it_did_not_write_are_sent_and_its_own_are_not(scripted_llm):
    flow = controller()
    scripted_llm.add(command("ask_user", question="Colour?"), command("ask_user", question="Shade?"))
    flow.run(data())
    logs = entry(1, "resume", "The run was resumed.") + "\n" + entry(2, "ask_user", "blue")
    flow.run(data(logs=logs, result="blue"))
    message = scripted_llm.calls[1]["messages"][-1]["content"]
    assert "New entries in the logs:\n--- [1]" in message and "resume" in message
    assert "--- [2]" not in message, "the entry of its own last command: its result is shown already"


def test_a_plan_it_gave_or_a_result_holds_is_named_not_repeated_and_a_long_argument_is_not_echoed(scripted_llm):
    flow = controller()
    code = "print('hello')\n" * 20
    new_plan = (
        "1. a new first step that is long enough to be worth naming\n2. and a second one, as long as the "
        "first.\n3. and a third one, to make it long."
    )
    scripted_llm.add(
        command("run_code", code=code), command("re_plan", goal="again"), command("ask_user", question="?")
    )
    flow.run(data())
    flow.run(data(result=f"result: hello\ncode: {code}"))
    flow.run(data(plan=new_plan, result=f"The plan has been rewritten. The new plan:\n{new_plan}\nContinue."))
    second, third = (c["messages"][-1]["content"] for c in scripted_llm.calls[1:])
    assert code not in second and "(the `code` of your command, unchanged)" in second
    assert third.count(new_plan) == 1 and third.endswith("The plan is now as the result above says.")


def test_the_library_sends_only_the_functions_not_shown_yet(scripted_llm):
    flow = controller(
        memory_message_prompt_template={
            "template": "Library:\n{{code_library}}\nPlan:\n{{plan}}",
            "input_variables": ["code_library", "plan"],
        },
        memory_updates={"code_library": {"heading": "New in the library", "items": "^(?:def |class )"}},
        input_interface_initialized=["goal", "plan", "logs", "memory_files", "code_library", "result"],
    )
    one = 'def one():\n    """One."""'
    two = 'def two(x):\n    """Two."""'
    scripted_llm.add(*[command("ask_user", question=str(i)) for i in range(3)])
    flow.run(data(code_library=one))
    flow.run(data(code_library=f"{one}\n\n{two}", result="saved two"))
    flow.run(data(code_library=f"{one}\n\n{two}", result="ok"))
    second, third = (c["messages"][-1]["content"] for c in scripted_llm.calls[1:])
    assert second.endswith(f"New in the library:\n{two}") and one not in second
    assert third == "Here is the result of your previous command:\nok"


def test_the_chat_is_rebuilt_once_per_block_with_a_fresh_snapshot_and_the_last_exchange(scripted_llm):
    flow = controller(prompt_blocks={"turns": 3, "keep_turns": 1, "snapshot_log_entries": 1})
    scripted_llm.add(*[command("ask_user", question=f"q{i}") for i in range(1, 6)])
    logs = ""
    for n in range(1, 6):
        flow.run(data(plan=f"plan v{n}", logs=logs, **({"result": f"answer {n - 1}"} if n > 1 else {})))
        logs = "\n".join(entry(i, "ask_user", f"answer {i}") for i in range(1, n + 1))
    calls = [c["messages"] for c in scripted_llm.calls]
    assert calls[1][:2] == calls[0] and calls[2][:4] == calls[1], "calls 2 and 3 append to the block"
    rebuilt = calls[3]
    assert [m["role"] for m in rebuilt] == ["system", "user", "assistant", "user"]
    assert rebuilt[0] == calls[0][0], "the head does not change"
    snapshot = rebuilt[1]["content"]
    assert "plan v4" in snapshot, "the snapshot shows the memory as it is now"
    assert "--- [2]" in snapshot and "--- [1]" not in snapshot and "[1 earlier entries are in logs.txt" in snapshot, (
        "at most snapshot_log_entries entries, a line saying where the others are"
    )
    assert "--- [3]" not in snapshot, "the kept exchange's own entry is not in the snapshot"
    assert rebuilt[2]["content"] == command("ask_user", question="q3")
    assert "The plan is now" not in rebuilt[3]["content"], "the snapshot holds the new plan already"
    assert calls[4][:4] == rebuilt, "the next block is appended to again"


def test_a_block_is_rebuilt_sooner_when_its_messages_pass_max_chars(scripted_llm):
    flow = controller(prompt_blocks={"turns": 10, "keep_turns": 1, "max_chars": 1000})
    scripted_llm.add(*[command("ask_user", question=f"q{i}") for i in range(1, 4)])
    flow.run(data())
    flow.run(data(result="x" * 300))
    flow.run(data(result="y" * 800))
    second, third = (c["messages"] for c in scripted_llm.calls[1:])
    assert third[: len(second)] != second and len(third) == 4, "the appended messages passed 1,000 characters"


def test_a_prompt_that_does_not_fit_starts_a_new_block_before_anything_is_cut(scripted_llm, quiet_console):
    flow = controller(context_window=2000, backend={"max_tokens": 200})
    scripted_llm.add(*[command("ask_user", question=f"q{i}") for i in range(1, 5)])
    first_words = " ".join(f"first{i}" for i in range(400))  # about 900 tokens: one fits, two do not
    more_words = " ".join(f"more{i}" for i in range(400))
    flow.run(data())
    flow.run(data(result=first_words))
    flow.run(data(result=more_words))
    second, third = (c["messages"] for c in scripted_llm.calls[1:])
    assert second[-1]["content"].endswith(first_words), "the first long result fits"
    assert [m["role"] for m in third] == ["system", "user", "assistant", "user"], "a new block"
    assert first_words not in json.dumps(third), "the earlier long result is not in the new block"
    assert third[-1]["content"].endswith(more_words), "the new one is whole: nothing had to be cut"
    flow.run(data(result="again"))
    assert scripted_llm.calls[3]["messages"][:4] == third, "and it is appended to"


def test_a_failed_call_leaves_the_block_as_it_was(scripted_llm):
    import pytest

    from aiflows_jarvis.CoreFlowModule import LLMCallError

    flow = controller()
    scripted_llm.add(command("ask_user", question="1"), LLMCallError("boom"), command("ask_user", question="2"))
    flow.run(data())
    with pytest.raises(LLMCallError):
        flow.run(data(result="a"))
    flow.run(data(result="a"))
    first, _, third = (c["messages"] for c in scripted_llm.calls)
    assert third[: len(first)] == first and len(third) == len(first) + 2


def test_a_function_saved_into_the_library_package_comes_alone_under_its_modules_header(scripted_llm, tmp_path):
    """Coder's own memory_updates over the package's summary: a save sends the function and its module's line, right
    under the module's header, not the summary again nor the functions around it."""
    import os

    import yaml

    from aiflows_jarvis.CodeLibraryFlowModule import package_summary
    from aiflows_jarvis.ExtendLibraryFlowModule import SaveCodeAtomicFlow

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "flow_modules", "aiflows_jarvis", "CoderFlowModule", "CoderFlow.yaml")) as f:
        updates = yaml.safe_load(f)["subflows_config"]["CtrlExMem"]["subflows_config"]["Controller"]["memory_updates"]
    library = {"code_library": str(tmp_path / "library")}
    save = SaveCodeAtomicFlow.instantiate_from_default_config()

    def saved(code, module):
        assert save.run({"code": code, "module": module, "memory_files": library})["result"].startswith("Saved")
        return package_summary(library["code_library"])

    saved('def growth_rates(values):\n    """Percent change from each value to the next."""\n    return values', "data")
    summary = saved('def slugify(text):\n    """A URL slug of a text."""\n    return text', "text")
    flow = controller(
        memory_message_prompt_template={"template": "Library:\n{{code_library}}", "input_variables": ["code_library"]},
        memory_updates={"code_library": updates["code_library"]},
        input_interface_initialized=["goal", "plan", "logs", "memory_files", "code_library", "result"],
    )
    scripted_llm.add(*[command("ask_user", question=str(i)) for i in range(4)])
    flow.run(data(code_library=summary))
    summary = saved('def mean_of(values):\n    """The mean of the values."""\n    return 0', "data")
    flow.run(data(code_library=summary, result="saved mean_of"))
    summary = saved('def svg_bar_chart(labels, values):\n    """An SVG bar chart."""\n    return ""', "charts")
    flow.run(data(code_library=summary, result="saved svg_bar_chart"))
    flow.run(data(code_library=summary, result="ok"))
    second, third, fourth = (c["messages"][-1]["content"] for c in scripted_llm.calls[1:])
    delta = second.split("New or changed in the code library:\n", 1)[1]
    assert "\n# library/data.py\ndef mean_of(values):" in f"\n{delta}", delta
    assert delta.startswith("- data: ") and "mean_of" in delta.split("\n")[0], "the module's line, updated"
    for shown_before in ("def growth_rates", "def slugify", "# library/text.py", "The library is the package"):
        assert shown_before not in delta, f"{shown_before} was shown already"
    delta = third.split("New or changed in the code library:\n", 1)[1]
    assert "# library/charts.py\ndef svg_bar_chart(labels, values):" in delta and "mean_of" not in delta, delta
    assert "# library/data.py" not in delta
    assert fourth == "Here is the result of your previous command:\nok"
