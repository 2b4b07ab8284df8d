"""The aiflows peer of benchmarks/run.py: aiflows 0.1.7's CircularFlow as it comes (``aiflows_loop``), run by
the project's interpreter but without importing the project.

    python benchmarks/peers/aiflows_peer.py rounds [--rounds 200]
        a loop of N rounds against a scripted backend; prints round times, two prompts and the peak RSS as JSON
    python benchmarks/peers/aiflows_peer.py first-request URL
        the same loop with aiflows' LiteLLMBackend pointed at an OpenAI-compatible server (URL ends in /v1); the
        server's first reply should be a finish command

aiflows opens a disk cache in the current folder (``.flow_cache``): run it in a scratch folder.
"""

from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from rounds import RoundClock, peer_main, word_count_task  # noqa: E402


def build(**overrides):
    from aiflows.utils import logging

    logging.set_verbosity_warning()
    from aiflows_loop import ControllerExecutor

    return ControllerExecutor.instantiate_from_default_config(**overrides)


def call(flow, goal: str) -> dict:
    from aiflows.messages import InputMessage

    message = InputMessage.build(data_dict={"goal": goal}, src_flow="Launcher", dst_flow=flow.name)
    return flow(message).data["output_data"]


def rounds(count: int) -> dict:
    import aiflows_loop.scripted as scripted

    scripted.CLOCK = clock = RoundClock(
        count,
        lambda i: json.dumps({"command": "count_words", "command_args": {"text": word_count_task(i)}}),
        json.dumps({"command": "finish", "command_args": {"summary": "all rounds done"}}),
    )
    flow = build(max_rounds=count + 1)
    output = call(flow, "count words, many times")
    return clock.result(status="finished" if output.get("summary") else f"stopped: {output}")


def first_request(url: str) -> dict:
    backend = {
        "_target_": "aiflows.backends.llm_lite.LiteLLMBackend",
        "api_infos": [{"backend_used": "openai", "api_key": "sk-benchmark", "api_base": url}],
        "model_name": {"openai": "openai/local-model"},
        "wait_time_per_key": 0,
        "n": 1,
        "max_tokens": 200,
        "temperature": 0.0,
        "stream": False,
    }
    flow = build(subflows_config={"Controller": {"backend": backend}})
    return {"output": call(flow, "say you are done")}


if __name__ == "__main__":
    peer_main(__doc__, rounds, first_request)
