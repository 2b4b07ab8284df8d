"""Write AutoGPT's demo transcript: python scripts/make_autogpt_demo_transcript.py

The controller's replies and the two search results are hand-written (the search results are short excerpts of
Wikipedia's and DuckDuckGo's answers, which change over time); everything else is a real run of AutoGPTFlow
(configs/autogpt.yaml), recorded the way `run_autogpt.py --record` records: every LLM exchange and every tool result.
The memory uses the deterministic local embeddings the demo replays with, so the prompts match on replay.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

import aiflows_jarvis  # noqa: F401,E402

GOAL = "When was the Eiffel Tower finished, and how tall is it?"
REPLIES = [
    {"command": "wiki_search", "command_args": {"search_term": "Eiffel Tower"}},
    {"command": "ddg_search", "command_args": {"query": "Eiffel Tower height in metres"}},
    {
        "command": "finish",
        "command_args": {
            "answer": "The Eiffel Tower was finished in 1889 (built 1887-1889 by "
            "Gustave Eiffel's company for the World's Fair). It is 330 m "
            "(1,083 ft) tall including its antennas."
        },
    },
]
OBSERVATIONS = {
    "search_term": "Page: Eiffel Tower\nSummary: The Eiffel Tower is a wrought-iron lattice tower on the Champ de "
    "Mars in Paris, France. It is named after the engineer Gustave Eiffel, whose company designed "
    "and built the tower from 1887 to 1889. It was the entrance arch to the 1889 World's Fair.",
    "query": "The Eiffel Tower is 330 metres (1,083 ft) tall including its antennas, about the height of an "
    "81-storey building. Without antennas it measures about 300 metres.",
}


def main() -> int:
    from aiflows_jarvis.app import launcher
    from aiflows_jarvis.ChatFlowModule import TranscriptRecorder
    from aiflows_jarvis.CoreFlowModule import AutoApproveInput, RunContext, set_memory_files
    from aiflows_jarvis.VectorStoreFlowModule import hash_embeddings_factory

    out = os.path.join(ROOT, "flow_modules", "aiflows_jarvis", "AutoGPTFlowModule", "demo", "demo_transcript.jsonl")
    replies = [json.dumps(r) for r in REPLIES]

    class Scripted:
        def __init__(self, *args, **kwargs):
            self.params = {}

        def __call__(self, messages, **kwargs):
            return [{"role": "assistant", "content": replies.pop(0)}]

    recorder = TranscriptRecorder(out, goal=GOAL, replies_by="hand")

    def tool(where, tool_input):
        observation = OBSERVATIONS[next(iter(tool_input))]
        recorder.record_tool(where, tool_input, observation)
        return observation

    with (
        tempfile.TemporaryDirectory() as memory_dir,
        RunContext(
            backend_factory=lambda config, name: Scripted(),
            backend_wrappers=[recorder.wrap],
            tool_replay=tool,
            embeddings_factory=hash_embeddings_factory,
            input_source=AutoApproveInput(),
        ),
    ):
        config = launcher.load_config(os.path.join(ROOT, "configs", "autogpt.yaml"))
        flow = launcher.instantiate(config, [{"backend_used": "openai", "api_key": "replay"}], memory_dir)
        set_memory_files(flow, memory_dir)
        flow.subflows["Memory"].flow_config["persist_directory"] = os.path.join(memory_dir, "autogpt_demo_store")
        print(flow.call({"goal": GOAL}))
    recorder.close()
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
