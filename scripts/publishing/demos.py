"""What each module's demo runs (`demo.yaml` and `run.py` in its staged folder, and its README's snippet)."""

from __future__ import annotations

from typing import Dict

import yaml

from .source import SOURCE_PACKAGE, PublishError, dependency_closure, rewrite

_MEMORY = {"plan": "memory/plan.txt", "logs": "memory/logs.txt", "code_library": "memory/library.py"}
DEMOS: Dict[str, dict] = {
    "ChatFlowModule": dict(cls="ChatAtomicFlow", llm=True, input={"query": "In one sentence: what is a flow?"}),
    "HumanStandardInputFlowModule": dict(cls="HumanStandardInputFlow", input={"question": "What is your name?"}),
    "MemoryReadingFlowModule": dict(
        cls="MemoryReadingAtomicFlow", overrides={"output_interface": ["plan", "logs"]}, input={"memory_files": _MEMORY}
    ),
    "MemoryWritingFlowModule": dict(
        cls="MemoryWritingAtomicFlow",
        input={"memory_files": _MEMORY, "command": "demo", "command_args": {"n": 1}, "result": "a log entry"},
    ),
    "UpdatePlanFlowModule": dict(
        cls="UpdatePlanAtomicFlow",
        input={"memory_files": _MEMORY, "updated_plan": "1. Try the module [done]\n2. Read its README"},
    ),
    "ControllerFlowModule": dict(
        cls="ControllerAtomicFlow",
        llm=True,
        overrides={"commands": {"say_hello": {"description": "Greet someone.", "input_args": ["name"]}}},
        input={"goal": "Greet Ada.", "plan": "1. Greet Ada.\n2. Finish.", "logs": "", "memory_files": {}},
    ),
    "PlanWriterFlowModule": dict(
        cls="PlanWriterFlow", llm=True, input={"goal": "Plan a picnic for four people.", "memory_files": _MEMORY}
    ),
    "ReplanningFlowModule": dict(
        cls="ReplanningFlow",
        llm=True,
        input={
            "goal": "It rains: the picnic must move indoors.",
            "plan": "1. Book a park table.\n2. Buy food.",
            "memory_files": _MEMORY,
        },
    ),
    "AbstractBossFlowModule": dict(
        cls="AbstractBossFlow",
        llm=True,
        memory=True,
        overrides={  # the commands of
            "memory_file_names": {"plan": "plan_boss.txt", "logs": "logs_boss.txt"}
        },  # every boss: ask_user, ...
        input={"goal": "Find out the user's favourite colour."},
    ),
    "InterpreterFlowModule": dict(
        cls="InterpreterAtomicFlow",
        overrides={"workspace": "memory"},
        input={"code": "import sys\nprint('Python', sys.version.split()[0], 'says', 6 * 7)", "language": "python"},
    ),
    "RunCodeFlowModule": dict(
        cls="RunCodeFlow",
        input={
            "code": "squares = [n * n for n in range(10)]\nprint(squares)",
            "language": "python",
            "memory_files": _MEMORY,
        },
    ),
    "InteractiveCodeGenFlowModule": dict(
        cls="InteractiveCodeGenFlow",
        llm=True,
        input={"goal": "is_prime(n: int) -> bool", "memory_files": _MEMORY, "code": ""},
    ),
    "TestCodeFlowModule": dict(
        cls="TestCodeFlow",
        input={"code": 'def double(x):\n    """Twice x."""\n    return 2 * x\n', "memory_files": _MEMORY},
    ),
    "CodeWriterFlowModule": dict(
        cls="CodeWriterFlow", llm=True, input={"goal": "is_prime(n: int) -> bool", "memory_files": _MEMORY}
    ),
    "ExtendLibraryFlowModule": dict(
        cls="ExtendLibraryFlow",
        llm=True,
        memory=True,
        input={"goal": "Add is_prime(n) and primes_below(n) to the library."},
    ),
    "CoderFlowModule": dict(
        cls="CoderFlow",
        llm=True,
        memory=True,
        input={"goal": "Write a reusable is_prime function, then list the primes below 50."},
    ),
    "JarvisFlowModule": dict(
        cls="JarvisFlow",
        llm=True,
        memory=True,
        replay="demo/demo_transcript.jsonl",
        overrides={"name": "Jarvis"},
        input={"goal": "Compute the first 20 Fibonacci numbers and save them to fibonacci.txt."},
    ),
    # ~~~ AutoGPT's modules ~~~
    "VectorStoreFlowModule": dict(
        cls="VectorStoreFlow",
        memory=True,
        overrides={"type": "faiss", "embedding": {"type": "hash"}},
        input={  # hash: deterministic local vectors, no model
            "operation": "write",
            "content": ["The Eiffel Tower was finished in 1889.", "Bananas are yellow."],
        },
    ),
    # network: the demo asks a web service (not run by --verify-venv, which is offline apart from pip)
    "LCToolFlowModule": dict(
        cls="LCToolFlow",
        network=True,
        overrides={"name": "ddg_search", "backend": {"_target_": "langchain_community.tools.DuckDuckGoSearchRun"}},
        input={"query": "aiflows EPFL"},
    ),
    "WikiSearchFlowModule": dict(cls="WikiSearchAtomicFlow", network=True, input={"search_term": "Eiffel Tower"}),
    # an MCP server of its own (demo/add_server.py, standard library only; a relative cwd is the module's folder)
    "MCPToolFlowModule": dict(
        cls="MCPToolFlow",
        overrides={
            "mcp_config": {
                "mcpServers": {
                    "demo": {"command": "python3", "args": ["add_server.py"], "cwd": "demo", "needs_approval": False}
                }
            }
        },
        input={"tool": "demo__add", "arguments": {"a": 2, "b": 3}},
    ),
    "AutoGPTFlowModule": dict(
        cls="AutoGPTFlow",
        llm=True,
        memory=True,
        overrides={"subflows_config": {"Memory": {"type": "faiss"}}},
        input={"goal": "When was the Eiffel Tower finished, and how tall is it?"},
    ),
}


_RUN_PY = '''\
"""Run {cls} on its own: `python run.py` in this folder ({llm_note}). `--yes` approves automatically."""
import os
import sys
import time

from aiflows import flow_verse

HERE = os.path.dirname(os.path.realpath(__file__))
{find_module}
from flow_modules.{namespace}.{module} import {cls}  # noqa: E402,F401  (first: the tokenizer is found offline)
import hydra  # noqa: E402
from aiflows.utils import logging  # noqa: E402
from aiflows.utils.general_helpers import read_yaml_file  # noqa: E402
from flow_modules.{namespace}.CoreFlowModule import AutoApproveInput, RunContext, set_memory_files  # noqa: E402

logging.set_verbosity_warning()
demo = read_yaml_file(os.path.join(HERE, "demo.yaml"))
input_data, memory_dir, auto_approve = demo["input_data"], demo.get("memory_dir"), demo.get("auto_approve")
workdir = None  # the code runs in the working directory
run = {{}}  # what the run is built with (RunContext's keywords)
have_llm = os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_API_BASE")
if demo.get("replay") and ("--replay" in sys.argv or not have_llm):
    # the recorded run: every chat answers from the transcript, offline, into a new memory folder (it was recorded
    # from an empty one), plans and code approved as they were
    from flow_modules.{namespace}.ChatFlowModule import Transcript, replay_factory

    transcript = Transcript.load(os.path.join(HERE, demo["replay"]))
    run["backend_factory"] = replay_factory(transcript)
    input_data = {{**input_data, "goal": transcript.header["goal"]}}
    memory_dir = os.path.join(memory_dir or "memory", time.strftime("replay-%Y%m%d-%H%M%S"))
    auto_approve, workdir = True, memory_dir  # and the code in the memory folder, as it was recorded
    print(f"Replaying the recorded demo (no LLM): {{transcript.path}}; memory files in {{memory_dir}}")
elif demo.get("uses_llm"):
    from aiflows.backends.api_info import ApiInfo
    from flow_modules.{namespace}.ChatFlowModule import with_api_infos

    if not have_llm:
        sys.exit("Set OPENAI_API_KEY (or OPENAI_API_BASE for an OpenAI-compatible server) to run this demo.")
    key, base = os.environ.get("OPENAI_API_KEY"), os.environ.get("OPENAI_API_BASE")
    api_infos = [ApiInfo(backend_used="openai", api_key=key or "sk-no-key", api_base=base)]
    overrides = {{"model_name": os.environ["OPENAI_MODEL"]}} if os.environ.get("OPENAI_MODEL") else {{}}
    run["backend_factory"] = with_api_infos(api_infos, **overrides){embeddings}
if auto_approve or "--yes" in sys.argv:
    run["input_source"] = AutoApproveInput()


def close(node):
    """Shut down what the flow started (interpreter kernels), everywhere in its tree."""
    for sub in getattr(node, "subflows", {{}}).values():
        close(sub)
    if callable(getattr(node, "close", None)):
        node.close()


with RunContext(**run):  # built before the flow: its chats get their backends from the run
    # the aiflows authors' demo.yaml format: `flow:` is instantiated by hydra
    flow = hydra.utils.instantiate(demo["flow"], _recursive_=False, _convert_="partial")
    if memory_dir:
        set_memory_files(flow, memory_dir, workdir)
    try:
        print(flow.call(input_data))
    finally:  # every flow of the tree that holds something (an interpreter's kernel, a vector store) lets it go
        close(flow)
'''

# In run.py, for a module with a vector store: its embeddings come from the same server, with the same key.
_RUN_PY_EMBEDDINGS = """

    from flow_modules.{namespace}.VectorStoreFlowModule import embeddings_with_api_infos

    run["embeddings_factory"] = embeddings_with_api_infos(api_infos,
                                                          model_name=os.environ.get("OPENAI_EMBEDDING_MODEL"))"""

_CORE_RUN_PY = '''\
"""Run a small flow on CoreFlowModule's lean base: `python run.py` in this folder (no LLM needed)."""
import os
import sys

from aiflows import flow_verse

HERE = os.path.dirname(os.path.realpath(__file__))
{find_module}
from flow_modules.{namespace}.CoreFlowModule import LeanAtomicFlow  # noqa: E402
from flow_modules.{namespace}.CoreFlowModule import count_tokens  # noqa: E402
from aiflows.utils.general_helpers import read_yaml_file  # noqa: E402


class CountFlow(LeanAtomicFlow):
    """Counts the tokens of `text` (with the tokenizer the module carries: no download)."""

    def run(self, input_data):
        return {{"tokens": count_tokens(input_data["text"])}}


demo = read_yaml_file(os.path.join(HERE, "demo.yaml"))
flow = CountFlow.instantiate_from_config({{"name": "CountFlow", "description": "counts tokens", "enable_cache": False,
                                          **(demo.get("flow") or {{}})}})
for _ in range(demo["calls"]):
    output = flow.call(demo["input_data"])
print(output, "- history kept:", len(flow.history), "of", flow.history.total, "messages")
'''


_CODE_LIBRARY_RUN_PY = '''\
"""Keep functions in a code library and read it back as Jarvis's prompts do: `python run.py` in this folder (no LLM
needed). The library is the package `library/` in the memory folder: `from library import name` imports it."""
import os
import sys

from aiflows import flow_verse

HERE = os.path.dirname(os.path.realpath(__file__))
{find_module}
from flow_modules.{namespace}.CodeLibraryFlowModule import ensure_library, package_summary, save_code  # noqa: E402
from flow_modules.{namespace}.CoreFlowModule import file_lock  # noqa: E402
from aiflows.utils.general_helpers import read_yaml_file  # noqa: E402

demo = read_yaml_file(os.path.join(HERE, "demo.yaml"))
package = ensure_library(os.path.join(demo["memory_dir"], "library"))  # made empty the first time
for code in demo["functions"]:
    with file_lock(package):  # one writer at a time
        why, module, replaced = save_code(package, code, None, replace=True)
    print(why or f"saved into library/{{module}}.py" + (f" (replacing {{', '.join(replaced)}})" if replaced else ""))
print(package_summary(package))
sys.path.insert(0, os.path.dirname(package))
from library import {call_name}  # noqa: E402

print("{call}:", {call})
'''


# How run.py finds its module: where a sync put it (`<project>/flow_modules/<namespace>/<module>`, from the hub or
# a local folder), it is imported from that project: FlowVerse refuses to sync a folder inside a `flow_modules/`.
# Anywhere else (a staged folder) it is synced into `flow_modules/` beside run.py's working directory first.
_FIND_MODULE = """\
SYNC_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if os.path.basename(SYNC_ROOT) == "flow_modules" and os.path.isfile(os.path.join(SYNC_ROOT, "__init__.py")):
    sys.path.insert(0, os.path.dirname(SYNC_ROOT))  # synced into a project: its dependencies are synced beside it
else:
    flow_verse.sync_dependencies([{{"url": "{namespace}/{module}", "revision": HERE}}])
"""


def demo_files(module: str, namespace: str) -> Dict[str, str]:
    """``demo.yaml`` and ``run.py`` of a staged module (its demo as DEMOS describes it)."""
    find_module = _FIND_MODULE.format(namespace=namespace, module=module)
    if module == "CoreFlowModule":
        demo = {"flow": {"history_size": 8}, "calls": 100, "input_data": {"text": "Flows all the way down."}}
        return {
            "demo.yaml": yaml.safe_dump(demo, sort_keys=False),
            "run.py": _CORE_RUN_PY.format(namespace=namespace, find_module=find_module),
        }
    if module == "CodeLibraryFlowModule":
        functions = [
            'def double(x):\n    """Twice x."""\n    return 2 * x\n',
            'def is_prime(n: int) -> bool:\n    """Whether n is a prime number."""\n'
            "    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))\n",
        ]
        demo = {"memory_dir": "memory", "functions": functions}
        return {
            "demo.yaml": yaml.safe_dump(demo, sort_keys=False, width=120),
            "run.py": _CODE_LIBRARY_RUN_PY.format(
                namespace=namespace, find_module=find_module, call_name="is_prime", call="is_prime(97)"
            ),
        }
    spec = DEMOS.get(module)
    if spec is None:
        raise PublishError(f"{module} has no demo in scripts/publishing/demos.py's DEMOS: add one")
    flow = {
        "_target_": f"{SOURCE_PACKAGE}.{module}.{spec['cls']}.instantiate_from_default_config",
        **(spec.get("overrides") or {}),
    }
    demo = {"flow": flow, "input_data": spec["input"]}
    if spec.get("memory"):
        demo["memory_dir"] = "memory"
    demo.update(uses_llm=bool(spec.get("llm")), auto_approve=False)
    header = f"# Run {spec['cls']} on its own: python run.py (in this folder). `flow:` is instantiated by hydra."
    if spec.get("llm"):
        header += "\n# The LLM: OPENAI_API_KEY, or OPENAI_API_BASE for an OpenAI-compatible server (and OPENAI_MODEL)."
        if "VectorStoreFlowModule" in dependency_closure([module]):
            header += (
                "\n# Embeddings: the same server and key, text-embedding-3-small unless OPENAI_EMBEDDING_MODEL "
                "names another."
            )
    if spec.get("replay"):
        demo["replay"] = spec["replay"]
        header += (
            f"\n# Without them (or with --replay), run.py replays the recorded run {spec['replay']},\n# "
            "offline, for the goal it was recorded with."
        )
    text = header + "\n" + rewrite(yaml.safe_dump(demo, sort_keys=False, width=120), namespace)
    llm_note = (
        "the LLM: OPENAI_API_KEY or OPENAI_API_BASE"
        if spec.get("llm")
        else "no LLM needed; it needs the network"
        if spec.get("network")
        else "no LLM needed"
    )
    if spec.get("replay"):
        llm_note += ", else the recorded demo is replayed"
    run = _RUN_PY.format(
        cls=spec["cls"],
        module=module,
        namespace=namespace,
        llm_note=llm_note,
        find_module=find_module,
        embeddings=_RUN_PY_EMBEDDINGS.format(namespace=namespace)
        if "VectorStoreFlowModule" in dependency_closure([module])
        else "",
    )
    return {"demo.yaml": text, "run.py": run}
