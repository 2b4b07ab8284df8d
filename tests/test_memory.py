"""Memory files: logs (append, tail), atomic writes, the code library read as signatures, the memory flows."""

from __future__ import annotations

import os

import pytest

from aiflows_jarvis.CodeLibraryFlowModule import library_summary
from aiflows_jarvis.CoreFlowModule import (
    ConfigurationError,
    append_log_entry,
    atomic_write,
    read_log_tail,
    read_text,
    shorten,
    split_log_entries,
)
from aiflows_jarvis.MemoryReadingFlowModule import MemoryReadingAtomicFlow
from aiflows_jarvis.MemoryWritingFlowModule import MemoryWritingAtomicFlow
from aiflows_jarvis.UpdatePlanFlowModule import UpdatePlanAtomicFlow

LIBRARY = '''
import pandas as pd


def download_stock_data(ticker_symbol: str, start_date: str, end_date: str) -> "pd.DataFrame":
    """Downloads the stock data for the given ticker symbol between the start and end dates.

    Parameters:
    ticker_symbol (str): The ticker symbol of the stock.
    """
    import yfinance
    secret_body_line = 42
    return yfinance.download(ticker_symbol, start=start_date, end=end_date)


def no_doc(x, *args, y=2, **kw):
    return x


class Portfolio:
    """A set of positions."""

    def __init__(self, positions):
        self.positions = positions

    def value(self) -> float:
        """Total value."""
        return 0.0

    def _private(self):
        pass
'''


def test_library_is_read_as_signatures_and_docstrings_not_bodies():
    summary = library_summary(LIBRARY)
    assert "def download_stock_data(ticker_symbol: str, start_date: str, end_date: str) -> 'pd.DataFrame':" in summary
    assert "Downloads the stock data" in summary and "ticker_symbol (str)" in summary
    assert "def no_doc(x, *args, y=2, **kw):" in summary and "(no docstring)" in summary
    assert "class Portfolio:" in summary and "def value(self) -> float:" in summary
    assert "secret_body_line" not in summary and "yfinance.download" not in summary, "bodies are left out"
    assert "_private" not in summary and "import pandas" not in summary


def test_a_library_that_does_not_parse_says_so():
    assert library_summary("def broken(:\n    pass\n").startswith("(the code library does not parse: line 1")
    assert library_summary("") == ""


def test_log_entries_are_appended_numbered_and_read_from_the_end(tmp_path):
    log = str(tmp_path / "logs.txt")
    for i in range(1, 31):
        assert append_log_entry(log, "run_code", {"code": f"x = {i}", "language": "python"}, f"result {i}") == i
    entries = split_log_entries(read_text(log))
    assert [n for n, _ in entries] == list(range(1, 31))
    assert "arguments: code = 'x = 7'; language = 'python'" in entries[6][1]
    tail = read_log_tail(log, 5)
    assert tail.startswith("[25 earlier entries are in logs.txt; the last 5 follow]")
    assert [n for n, _ in split_log_entries(tail)] == [26, 27, 28, 29, 30]
    assert read_log_tail(log, None).count("--- [") == 30


def test_a_long_result_is_shortened_keeping_head_and_tail(tmp_path):
    log = str(tmp_path / "logs.txt")
    append_log_entry(log, "run_code", {"code": "print(x)"}, "HEAD" + "x" * 10_000 + "TAIL", result_limit=200)
    text = read_text(log)
    assert "HEAD" in text and "TAIL" in text and "characters cut" in text and len(text) < 700
    assert shorten("abc", 10) == "abc"


def test_atomic_write_replaces_the_whole_file_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "plan.txt"
    atomic_write(str(path), "1. one\n")
    atomic_write(str(path), "1. one [done]\n2. two\n")
    assert path.read_text() == "1. one [done]\n2. two\n"
    assert os.listdir(tmp_path) == ["plan.txt"]


def test_atomic_write_gives_a_new_file_the_users_default_mode_and_keeps_an_existing_files_mode(tmp_path):
    old_mask = os.umask(0o022)
    try:
        new = tmp_path / "library.py"
        atomic_write(str(new), "x = 1\n")
        assert new.stat().st_mode & 0o777 == 0o644, "a new memory file is readable like any file the user makes"
        new.chmod(0o640)
        atomic_write(str(new), "x = 2\n")
        assert new.stat().st_mode & 0o777 == 0o640, "replacing a file keeps the mode the user gave it"
    finally:
        os.umask(old_mask)


def test_memory_reading_flow_reads_each_memory_its_own_way(tmp_path):
    files = {k: str(tmp_path / f"{k}.txt") for k in ("plan", "logs")}
    files["code_library"] = str(tmp_path / "library.py")
    atomic_write(files["plan"], "1. do it\n")
    atomic_write(files["code_library"], LIBRARY)
    for i in range(3):
        append_log_entry(files["logs"], "ask_user", {"question": f"q{i}"}, f"a{i}")
    flow = MemoryReadingAtomicFlow.instantiate_from_default_config(
        output_interface=["plan", "logs", "code_library"], max_log_entries=2
    )
    out = flow.run({"memory_files": files})
    assert out["plan"] == "1. do it"
    assert out["logs"].startswith("[1 earlier entries") and "q2" in out["logs"] and "q0" not in out["logs"]
    assert "def download_stock_data" in out["code_library"] and "secret_body_line" not in out["code_library"]


def test_memory_flows_name_a_missing_memory(tmp_path):
    flow = MemoryReadingAtomicFlow.instantiate_from_default_config(output_interface=["plan", "code_library"])
    with pytest.raises(ConfigurationError, match="memory_files has no 'code_library'"):
        flow.run({"memory_files": {"plan": str(tmp_path / "p.txt")}})
    with pytest.raises(ConfigurationError, match="`memory_files` is not set"):
        MemoryWritingAtomicFlow.instantiate_from_default_config().run({"command": "x", "result": "y"})


def test_memory_writing_flow_appends_one_entry_per_command(tmp_path):
    files = {"plan": str(tmp_path / "plan.txt"), "logs": str(tmp_path / "logs.txt")}
    flow = MemoryWritingAtomicFlow.instantiate_from_default_config()
    assert flow.run(
        {
            "memory_files": files,
            "command": "ask_user",
            "command_args": {"question": "q"},
            "result": "The user replied: yes",
        }
    ) == {"log_entries": 1}
    assert flow.run({"memory_files": files, "command": "finish", "command_args": {}, "result": ""}) == {
        "log_entries": 2
    }
    assert "ask_user" in read_text(files["logs"]) and "The user replied: yes" in read_text(files["logs"])


def test_update_plan_writes_the_plan_and_refuses_an_empty_one(tmp_path):
    files = {"plan": str(tmp_path / "plan.txt")}
    flow = UpdatePlanAtomicFlow.instantiate_from_default_config()
    out = flow.run({"updated_plan": "1. a [done]\n2. b", "memory_files": files})
    assert "updated" in out["result"] and read_text(files["plan"]) == "1. a [done]\n2. b\n"
    out = flow.run({"updated_plan": "  ", "memory_files": files})
    assert "NOT updated" in out["result"] and read_text(files["plan"]) == "1. a [done]\n2. b\n", "nothing is lost"


def test_update_plan_tells_the_controller_what_changed(tmp_path):
    files = {"plan": str(tmp_path / "plan.txt")}
    atomic_write(files["plan"], "1. Write growth_rates.\n2. Run code: compute\n   the growth.\n3. Answer.\n")
    flow = UpdatePlanAtomicFlow.instantiate_from_default_config()
    out = flow.run(
        {
            "updated_plan": "1. Write growth_rates. [done]\n2. Run code: compute\n   the growth.\n3. Answer.",
            "memory_files": files,
        }
    )
    assert out["result"] == (
        "The plan was updated: step 1 now marked done (1 of 3 steps done; next: step 2: Run code: compute the growth.)."
    )
    out = flow.run(
        {
            "updated_plan": "1. Write growth_rates. [done]\n2. Run code: plot instead. [done]\n3. Answer.",
            "memory_files": files,
        }
    )
    assert "step 2 now marked done (2 of 3 steps done" in out["result"]
    assert "the steps themselves changed too" in out["result"] and "re_plan" in out["result"], (
        "a rewrite passed off as marking steps done is pointed out"
    )
    out = flow.run({"updated_plan": read_text(files["plan"]), "memory_files": files})
    assert out["result"] == "The plan file already held this plan; nothing changed."


def test_update_plan_counts_the_top_level_steps_and_says_when_a_mark_is_taken_back():
    from aiflows_jarvis.UpdatePlanFlowModule.UpdatePlanAtomicFlow import describe_update

    old = "1. Prepare:\n   1) load the data\n   2) clean it\n2. Plot it."
    assert describe_update(old, old.replace("Prepare:", "Prepare: [done]")) == (
        "The plan was updated: step 1 now marked done (1 of 2 steps done; next: step 2: Plot it.)."
    )
    taken_back = describe_update("1. a [done]\n2. b [done]\n3. c", "1. a [done]\n2. b\n3. c [done]")
    assert "step 3 now marked done; step 2 no longer marked done" in taken_back


def test_marking_every_step_of_a_long_plan_says_it_in_a_few_words(tmp_path, quiet_console):
    """A finish made by code marks the steps left: of a plan of 5,000 steps (a 5 MB plan has 130,000), the result
    and the screen say 'steps 1 to 5000', not every number (a text as long as the plan, and each step's number
    looked up in a list and a set difference made for each: quadratic, a 5 MB plan never finished)."""
    files = {"plan": str(tmp_path / "plan.txt")}
    atomic_write(files["plan"], "".join(f"{i}. Step {i}.\n" for i in range(1, 5001)))
    flow = UpdatePlanAtomicFlow.instantiate_from_default_config()
    out = flow.run({"done_steps": list(range(1, 5001)), "memory_files": files})
    assert out["result"] == "The plan was updated: steps 1 to 5000 now marked done (all 5000 steps are done).", out[
        "result"
    ][:300]
    assert "steps 1 to 5000 done; all 5000 steps are done" in quiet_console.text
    assert read_text(files["plan"]).count("[done]") == 5000
