"""The boss loop's cost per round does not grow with the round count (not timed: what a round carries is measured).

Stock aiflows 0.1.7 copies each subflow's whole history into every output message and keeps every message, so what
a round carries grows with the round number (quadratic time and memory over a run). See benchmarks/loop_rounds.py
for the timings.
"""
from __future__ import annotations

from fakes import carried_messages, carried_size, command, finish
from aiflows_jarvis.AbstractBossFlowModule import CtrlExMemFlow
from aiflows_jarvis.CoreFlowModule.lean import DEFAULT_HISTORY_SIZE

ROUNDS = 200


def flows_of(flow):
    yield flow
    for sub in getattr(flow, "subflows", {}).values():
        yield from flows_of(sub)


def test_what_a_round_carries_is_bounded_and_flat_up_to_round_200(tmp_path, scripted_llm, quiet_console):
    flow = CtrlExMemFlow.instantiate_from_default_config(
        max_rounds=ROUNDS + 1,
        subflows_config={
            "Controller": {"commands": {"count_words": {"description": "count", "input_args": ["text"]}}},
            "Executor": {"subflows_config": {"count_words": {
                "_target_": "flows_for_tests.WordCountFlow.instantiate_from_default_config"}}},
        },
    )
    memory_files = {"plan": str(tmp_path / "plan.txt"), "logs": str(tmp_path / "logs.txt")}
    (tmp_path / "plan.txt").write_text("1. count words 200 times\n")
    measured = {}

    def reply(round_number):
        def answer(messages):
            measured[round_number] = (carried_size(flow), carried_messages(flow), len(messages),
                                      len(messages[0]["content"]))
            return command("count_words", text=f"words of round {round_number}")
        return answer

    scripted_llm.add(*[reply(i) for i in range(1, ROUNDS + 1)], finish("counted"))
    out = flow.run({"goal": "count words", "memory_files": memory_files, "plan": "1. count", "logs": ""})

    assert out["status"] == "finished"
    assert (tmp_path / "logs.txt").read_text().count("--- [") == ROUNDS, "every round is in the log file"
    size_20, messages_20, sent_20, _ = measured[20]
    size_50, messages_50, sent_50, prompt_50 = measured[50]
    size_200, messages_200, sent_200, prompt_200 = measured[200]
    bound = DEFAULT_HISTORY_SIZE * len(list(flows_of(flow)))
    assert messages_20 <= bound and messages_200 <= bound, "each flow keeps at most its last 32 messages"
    assert messages_200 == messages_50, "the histories hold as many messages at round 200 as at round 50"
    assert sent_200 == sent_20 == 3, "the controller sends the same window: system prompt, last reply, new result"
    # What a round carries still grows a little after round 20, and is flat from about round 36 on: the leaf flows
    # log one message a round, so their histories fill at round 33; the prompts show the last 20 log entries
    # (MemoryReading's max_log_entries), so the logs in the state stop growing at round 20, and the histories hold
    # messages from before that for 32 more rounds.
    assert size_20 < size_50 < 1.5 * size_20, (size_20, size_50)
    assert abs(size_200 - size_50) / size_50 < 0.02, (size_50, size_200)  # only wider entry numbers differ
    assert abs(prompt_200 - prompt_50) / prompt_50 < 0.02, (prompt_50, prompt_200)  # the logs tail is bounded
