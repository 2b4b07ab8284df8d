"""The smolagents peer of benchmarks/run.py: smolagents' CodeAgent, run by the interpreter of the virtual
environment smolagents was installed into (see ``install.py``); standard library + smolagents only.

    python smolagents_peer.py rounds [--rounds 200]
        a CodeAgent loop of N steps with a scripted model (each step runs a line of code that counts words, as the
        other loops' command does); prints step times, two prompts and the peak RSS as JSON
    python smolagents_peer.py first-request URL
        a CodeAgent with OpenAIServerModel pointed at an OpenAI-compatible server (URL ends in /v1); the server's
        first reply should end the run (a final_answer code block)
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from rounds import RoundClock, peer_main, word_count_task  # noqa: E402

GOAL = "count words, many times"


def code_reply(code: str) -> str:
    return f"Thought: the next step.\n<code>\n{code}\n</code>"


def agent(model, max_steps: int):
    from smolagents import CodeAgent
    from smolagents.monitoring import LogLevel

    # no console output: the other loops of the benchmark print nothing either
    return CodeAgent(tools=[], model=model, max_steps=max_steps, verbosity_level=LogLevel.OFF)


def rounds(count: int) -> dict:
    from smolagents.models import ChatMessage, MessageRole, Model
    from smolagents.monitoring import TokenUsage

    clock = RoundClock(
        count,
        lambda i: code_reply(f"print(len({word_count_task(i)!r}.split()))"),
        code_reply('final_answer("all rounds done")'),
    )

    class ScriptedModel(Model):
        """Answers from the clock, after the per-call message preparation every API model of smolagents does."""

        def generate(self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None, **kwargs):
            prepared = self._prepare_completion_kwargs(
                messages=messages,
                stop_sequences=stop_sequences,
                response_format=response_format,
                tools_to_call_from=tools_to_call_from,
                model=self.model_id,
                **kwargs,
            )
            return ChatMessage(
                role=MessageRole.ASSISTANT,
                content=clock.reply(prepared["messages"]),
                token_usage=TokenUsage(input_tokens=0, output_tokens=0),
            )

    output = agent(ScriptedModel(model_id="scripted"), max_steps=count + 1).run(GOAL)
    return clock.result(status="finished" if output == "all rounds done" else f"stopped: {output!r}")


def first_request(url: str) -> dict:
    from smolagents import OpenAIServerModel

    model = OpenAIServerModel(model_id="local-model", api_base=url, api_key="sk-benchmark")
    return {"output": str(agent(model, max_steps=1).run("say you are done"))}


if __name__ == "__main__":
    peer_main(__doc__, rounds, first_request)
