"""Lean flows: bounded history, no history copies in output messages, the run trace, errors that name the flow."""

from __future__ import annotations

import json

import pytest
from aiflows.messages import InputMessage
from flows_for_tests import WordCountFlow

from aiflows_jarvis.CoreFlowModule import LeanFlowMixin, RunContext
from aiflows_jarvis.CoreFlowModule.flows.lean import BoundedHistory


def call(flow, data):
    return flow(InputMessage.build(data_dict=data, src_flow="Test", dst_flow=flow.name))


def test_history_is_bounded_and_output_messages_carry_no_history():
    flow = WordCountFlow.instantiate_from_default_config(history_size=5)
    for i in range(50):
        out = call(flow, {"text": "a b " * i})
    assert isinstance(flow.history, BoundedHistory)
    assert len(flow.history) == 5 and flow.history.total == 50, "the last 5 of 50 messages are kept"
    assert out.history == [], "an output message does not copy the flow's history"
    assert out.get_output_data() == {"result": "The text has 98 words."}


def test_no_disk_cache_is_opened_by_a_lean_flow(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    WordCountFlow.instantiate_from_default_config().run({"text": "x"})
    assert not (tmp_path / ".flow_cache").exists()


def test_the_run_trace_holds_every_message_once(tmp_path):
    trace = tmp_path / "trace.jsonl"
    flow = WordCountFlow.instantiate_from_default_config(history_size=2)
    with RunContext(trace_file=str(trace)):
        for _ in range(4):
            call(flow, {"text": "one two"})
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [r["type"] for r in records] == ["InputMessage"] * 4, "inputs are logged; outputs go to the caller"
    assert records[0]["flow"] == "count_words" and records[0]["data"] == {"text": "one two"}


def test_an_error_names_the_flow_it_happened_in():
    flow = WordCountFlow.instantiate_from_default_config()
    with pytest.raises(KeyError) as error:
        call(flow, {"no_text": 1})
    assert error.value.flow_path == "count_words"


def test_lean_bases_keep_aiflows_config_loading():
    # the config loader follows the first base only: the lean classes must keep aiflows' class first
    for cls in LeanFlowMixin.__subclasses__():
        assert cls.__base__ is not LeanFlowMixin, cls
    cfg = WordCountFlow.get_config()
    assert cfg["name"] == "count_words" and cfg["enable_cache"] is False
