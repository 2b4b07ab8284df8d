"""A configuration of the original Jarvis tree shape instantiates with quick_load and one memory helper, and runs to
its final answer through the real LiteLLMBackend and the loopback server (no backend factory involved)."""

from __future__ import annotations

import os

from aiflows.backends.api_info import ApiInfo
from aiflows.backends.llm_lite import LiteLLMBackend
from helpers import DEMO
from loopback_llm import LoopbackLLMServer

from aiflows_jarvis.app import launcher
from aiflows_jarvis.ChatFlowModule import ChatAtomicFlow, Transcript
from aiflows_jarvis.CoreFlowModule import AutoApproveInput
from aiflows_jarvis.JarvisFlowModule import JarvisFlow

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_original_tree_shape_runs_to_the_final_answer(tmp_path, quiet_console, run_context):
    config = launcher.load_config(os.path.join(ROOT, "configs", "jarvis.yaml"))
    transcript = Transcript.load(DEMO)
    with LoopbackLLMServer(replies=transcript.replies()) as server:
        flow = launcher.instantiate(
            config, [ApiInfo(backend_used="openai", api_key="sk-test", api_base=server.url)], str(tmp_path)
        )
        try:
            assert isinstance(flow, JarvisFlow)
            chats = [(path, node) for path, node in launcher.walk(flow) if isinstance(node, ChatAtomicFlow)]
            assert len(chats) == 17, [p for p, _ in chats]
            for path, chat in chats:
                assert isinstance(chat.backend, LiteLLMBackend), path
                (info,) = chat.backend.api_infos.values()
                assert info.api_base == server.url, path
            run_context.input_source = AutoApproveInput()
            out = flow.call({"goal": transcript.header["goal"]})
        finally:
            launcher.close_interpreters(flow)
        assert not server.errors and len(server.requests) == len(transcript.records)
    assert out["status"] == "finished", out
    assert out["answer"].startswith("Month-over-month growth of the sales: Feb +12.5%")
    assert "final_answer" in (tmp_path / "logs_jarvis.txt").read_text()
    assert (tmp_path / "sales_chart.svg").exists()


def test_intermediate_and_final_answers_show_the_answer_and_return_the_feedback(user):
    from aiflows_jarvis.JarvisFlowModule import FinalAns_Jarvis, IntermediateAns_Jarvis

    user.add("", "add the median too")
    assert IntermediateAns_Jarvis.instantiate_from_default_config().run({"answer": "step 1 gave 42"}) == {
        "human_input": ""
    }
    final = FinalAns_Jarvis.instantiate_from_default_config().run({"answer": "the mean is 3"})
    assert final == {"answer": "the mean is 3", "human_input": "add the median too"}
    assert "step 1 gave 42" in user.asked[0]["prompt"] and user.asked[1]["kind"] == "feedback"


def test_configs_jarvis_yaml_names_every_chat_of_jarvis():
    from aiflows_jarvis.CoreFlowModule import walk_config
    from aiflows_jarvis.CoreFlowModule.flows.config_tree import chat_backends_skeleton

    def chats(config):
        return sorted(path for path, node, _ in walk_config(config) if "backend" in node)

    skeleton = chat_backends_skeleton(
        "aiflows_jarvis.JarvisFlowModule.JarvisFlow.instantiate_from_default_config", name="Jarvis"
    )
    shipped = launcher.load_config(os.path.join(ROOT, "configs", "jarvis.yaml"))["flow"]
    assert chats(shipped) == chats(skeleton) and len(chats(skeleton)) == 17
