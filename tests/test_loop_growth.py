"""The boss loop's cost per round does not grow with the round count (not timed: what a round carries is measured).

Stock aiflows 0.1.7 copies each subflow's whole history into every output message and keeps every message, so what
a round carries grows with the round number (quadratic time and memory over a run). See benchmarks/loop_rounds.py
for the timings.
"""

from __future__ import annotations

from fakes import carried_messages, carried_size, command, finish
from helpers import word_count_loop

from aiflows_jarvis.CoreFlowModule import count_message_tokens
from aiflows_jarvis.CoreFlowModule.flows.lean import DEFAULT_HISTORY_SIZE

ROUNDS = 200


def flows_of(flow):
    yield flow
    for sub in getattr(flow, "subflows", {}).values():
        yield from flows_of(sub)


def test_what_a_round_carries_is_bounded_and_flat_up_to_round_200(tmp_path, scripted_llm, quiet_console):
    flow = word_count_loop(ROUNDS + 1, "count")
    memory_files = {"plan": str(tmp_path / "plan.txt"), "logs": str(tmp_path / "logs.txt")}
    (tmp_path / "plan.txt").write_text("1. count words 200 times\n")
    measured, prompts = {}, {}

    def reply(round_number):
        def answer(messages):
            measured[round_number] = (carried_size(flow), carried_messages(flow))
            prompts[round_number] = [dict(m) for m in messages]
            return command("count_words", text=f"words of round {round_number}")

        return answer

    scripted_llm.add(*[reply(i) for i in range(1, ROUNDS + 1)], finish("counted"))
    out = flow.run({"goal": "count words", "memory_files": memory_files, "plan": "1. count", "logs": ""})

    assert out["status"] == "finished"
    assert (tmp_path / "logs.txt").read_text().count("--- [") == ROUNDS, "every round is in the log file"
    size_20, messages_20 = measured[20]
    size_50, messages_50 = measured[50]
    size_200, messages_200 = measured[200]
    bound = DEFAULT_HISTORY_SIZE * len(list(flows_of(flow)))
    assert messages_20 <= bound and messages_200 <= bound, "each flow keeps at most its last 32 messages"
    assert messages_200 == messages_50, "the histories hold as many messages at round 200 as at round 50"
    # What a round carries grows a little after round 20, and is flat from about round 36 on: the leaf flows log one
    # message a round, so their histories fill at round 33; the chat holds one block of at most 10 calls.
    assert size_20 < 1.5 * size_50 and size_50 < 1.5 * size_20, (size_20, size_50)
    assert abs(size_200 - size_50) / size_50 < 0.02, (size_50, size_200)  # only wider entry numbers differ
    tokens = {n: count_message_tokens(m) for n, m in prompts.items()}
    assert tokens[200] / tokens[20] <= 1.1, (tokens[20], tokens[200])
    early, late = max(tokens[n] for n in range(1, 21)), max(tokens[n] for n in range(181, 201))
    assert late / early <= 1.1, "the prompt at its longest is as long late in the run as early"
    rebuilt = [n for n in range(2, ROUNDS + 1) if prompts[n][: len(prompts[n - 1])] != prompts[n - 1]]
    assert rebuilt == list(range(11, ROUNDS + 1, 10)), "the chat is rebuilt once per block of 10 calls, no more"


def test_consecutive_calls_share_their_prefix_and_the_window_slides_in_blocks(tmp_path, scripted_llm, quiet_console):
    """Between two rebuilds each call's messages start with the previous call's, byte for byte (the new reply is
    the next message); a rebuild keeps the head, a fresh snapshot of the memory and the last exchange."""
    flow = word_count_loop(30, "count")
    memory_files = {"plan": str(tmp_path / "plan.txt"), "logs": str(tmp_path / "logs.txt")}
    scripted_llm.add(*[command("count_words", text=f"words of round {i}") for i in range(1, 13)], finish("done"))
    flow.run({"goal": "count words", "memory_files": memory_files, "plan": "1. count", "logs": ""})
    calls = [c["messages"] for c in scripted_llm.calls]
    for n in range(1, 10):  # calls 2..10
        previous, current = calls[n - 1], calls[n]
        assert current[: len(previous)] == previous, f"call {n + 1} starts with call {n}'s messages"
        assert current[len(previous)] == {
            "role": "assistant",
            "content": command("count_words", text=f"words of round {n}"),
        }
        assert len(current) == len(previous) + 2
    rebuilt = calls[10]
    assert rebuilt[0] == calls[9][0], "the head is the same after a rebuild"
    assert [m["role"] for m in rebuilt] == ["system", "user", "assistant", "user"], (
        "head, memory snapshot, the last exchange, the new result"
    )
    snapshot = rebuilt[1]["content"]
    assert "--- [9] " in snapshot and "--- [10] " not in snapshot, (
        "the snapshot holds the log entries up to the kept exchange; its own entry is not repeated"
    )
    assert rebuilt[2]["content"] == command("count_words", text="words of round 10")
    assert calls[11][:4] == rebuilt, "and the next block is appended to again"
