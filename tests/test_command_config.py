"""A command is declared once: `commands: {name: {description, input_args, flow}}` in a loop's configuration; the
controller's commands and the executor's branches are derived from it when the loop is built. The original
configuration's override points (`...Executor.subflows_config.<command>`, `...Controller.commands.<command>`) still
work; a command without a flow, or a branch without a command, is refused at instantiation with the key's path."""

from __future__ import annotations

import copy

import pytest
from fakes import Sink, command, finish, system_message

from aiflows_jarvis.AbstractBossFlowModule import AbstractBossFlow
from aiflows_jarvis.ControllerFlowModule import ControllerExecutorFlow
from aiflows_jarvis.ControllerFlowModule.command_config import derive_commands
from aiflows_jarvis.CoreFlowModule import ConfigurationError, Console, set_memory_files, walk_config
from aiflows_jarvis.JarvisFlowModule import JarvisFlow

WORDS = "flows_for_tests.WordCountFlow.instantiate_from_default_config"
ECHO_TOOLS = "flows_for_tests.EchoToolFlow.instantiate_from_default_config"
ASK = "aiflows_jarvis.HumanStandardInputFlowModule.HumanStandardInputFlow.instantiate_from_default_config"
CODER = "Jarvis.subflows_config.CtrlExMem.subflows_config.Executor.subflows_config.Coder.subflows_config.CtrlExMem"
LOOP_INPUT = {"goal": "count", "plan": "1. count", "logs": "", "memory_files": {}}


def coder_loop(flow):
    return flow.subflows["CtrlExMem"].subflows["Executor"].subflows["Coder"].subflows["CtrlExMem"]


# ~~~ The derivation ~~~
def test_the_controller_gets_the_commands_and_the_executor_their_flows():
    config = {
        "commands": {
            "count_words": {"description": "Count words.", "input_args": ["text"], "flow": {"_target_": WORDS}},
            "ask_user": {"description": "Ask.", "input_args": ["question"], "flow": {"_target_": ASK, "x": 1}},
            "finish": {"description": "Done.", "input_args": ["summary"]},
        },
        "subflows_config": {
            "Controller": {
                "_target_": "aiflows_jarvis.ControllerFlowModule.ControllerAtomicFlow.instantiate_from_default_config"
            },
            "Executor": {"subflows_config": {"ask_user": {"x": 2, "y": 3}}},
        },
    }
    given = copy.deepcopy(config)
    derived = derive_commands(config, "Loop")
    assert config == given, "the configuration given is not modified"
    told = derived["subflows_config"]["Controller"]["commands"]
    assert list(told) == ["count_words", "ask_user", "finish"]
    assert told["count_words"] == {"description": "Count words.", "input_args": ["text"]}, "without its flow"
    assert derived["subflows_config"]["Executor"]["subflows_config"] == {
        "count_words": {"_target_": WORDS},
        "ask_user": {"_target_": ASK, "x": 2, "y": 3},  # the override point is merged over the command's flow
    }, "finish is run by the loop: no branch"
    assert derived["commands"] == told, "the loop keeps the declarations, its flows are the branches"


def test_the_two_halves_declared_at_the_override_points_still_pair_up(scripted_llm, user):
    loop = ControllerExecutorFlow.instantiate_from_default_config(
        subflows_config={
            "Controller": {"commands": {"count_words": {"description": "Count words.", "input_args": ["text"]}}},
            "Executor": {"subflows_config": {"count_words": {"_target_": WORDS}}},
        }
    )
    assert {c.name for c in loop.subflows["Controller"].commands} == {"count_words", "finish"}
    assert set(loop.subflows["Executor"].subflows) == {"count_words"}


def test_a_loop_built_from_one_declaration_runs_and_derives_nothing_per_round(scripted_llm, monkeypatch):
    loop = ControllerExecutorFlow.instantiate_from_default_config(
        commands={"count_words": {"description": "Count words.", "input_args": ["text"], "flow": {"_target_": WORDS}}}
    )

    def derived_again(*args, **kwargs):
        raise AssertionError("the commands were derived again after the loop was built")

    monkeypatch.setattr(ControllerExecutorFlow, "derived_config", classmethod(derived_again))
    scripted_llm.add(command("count_words", text="a b c"), command("count_words", text="d e"), finish("counted"))
    out = loop.call(LOOP_INPUT)
    assert out["status"] == "finished" and out["summary"] == "counted"
    assert "2" in out["result"], "the last command's branch ran"


# ~~~ The original tree and its override points ~~~
def test_jarvis_has_the_original_tree_with_every_command_paired(scripted_llm):
    flow = JarvisFlow.instantiate_from_default_config()
    loop = flow.subflows["CtrlExMem"]
    assert set(loop.subflows) == {"Controller", "Executor", "MemoryWriting", "MemoryReading"}
    assert set(loop.subflows["Executor"].subflows) == {
        "Coder",
        "ask_user",
        "re_plan",
        "update_plan",
        "intermediate_answer",
        "final_answer",
        "search_logs",
    }
    coder = coder_loop(flow)
    assert set(coder.subflows["Executor"].subflows) == {
        "extend_library",
        "run_code",
        "ask_user",
        "re_plan",
        "update_plan",
        "search_library",
        "search_logs",
        "tools",
    }, "tools: the branch that runs the run's MCP tools"
    extend = coder.subflows["Executor"].subflows["extend_library"].subflows["CtrlExMem"]
    assert set(extend.subflows["Executor"].subflows["write_code"].subflows["Executor"].subflows) == {
        "write_code",
        "test",
        "ask_user",
    }


# ~~~ The commands of every boss: declared once, in CtrlExMemFlow.yaml ~~~
EVERY_BOSS = ["ask_user", "re_plan", "update_plan", "search_logs"]


def listed(loop):
    """The commands a loop's controller lists, in order."""
    return [c.name for c in loop.subflows["Controller"].commands]


def test_every_boss_has_the_commands_of_ctrlexmemflow_listed_after_its_own(scripted_llm):
    jarvis = JarvisFlow.instantiate_from_default_config()
    coder = coder_loop(jarvis)
    extend = coder.subflows["Executor"].subflows["extend_library"].subflows["CtrlExMem"]
    assert listed(jarvis.subflows["CtrlExMem"]) == [
        "Coder",
        "intermediate_answer",
        "final_answer",
        *EVERY_BOSS,
        "finish",
    ]
    assert listed(coder) == ["extend_library", "run_code", "search_library", *EVERY_BOSS, "finish"]
    assert listed(extend) == ["write_code", "save_code", "ask_user", "re_plan", "update_plan", "finish"], (
        "ExtendLibrary leaves search_logs out (search_logs: null)"
    )
    plain = AbstractBossFlow.instantiate_from_default_config(
        subflows_config={
            "CtrlExMem": {
                "commands": {
                    "count_words": {"description": "Count words.", "input_args": ["text"], "flow": {"_target_": WORDS}}
                }
            }
        }
    )
    assert listed(plain.subflows["CtrlExMem"]) == ["count_words", *EVERY_BOSS, "finish"], "a boss of one's own too"
    branches = {
        name: loop.subflows["Executor"].subflows
        for name, loop in [
            ("Jarvis", jarvis.subflows["CtrlExMem"]),
            ("Coder", coder),
            ("plain", plain.subflows["CtrlExMem"]),
        ]
    }
    assert {type(b["re_plan"]).__name__ for b in branches.values()} == {"ReplanningFlow"}
    assert type(branches["Jarvis"]["update_plan"]).__module__ == "aiflows_jarvis.JarvisFlowModule.UpdatePlanAtomicFlow"
    assert (
        type(branches["Coder"]["update_plan"]).__module__ == "aiflows_jarvis.UpdatePlanFlowModule.UpdatePlanAtomicFlow"
    ), "Jarvis changes the flow of its own update_plan"
    told = {c.name: c for c in coder.subflows["Controller"].commands}
    assert told["re_plan"].description.startswith("Rewrite the plan when it cannot be followed, or when the goal"), (
        "Coder changes re_plan's description, and keeps its arguments and flow"
    )
    assert told["re_plan"].input_args == ["goal"]


def test_a_configuration_leaves_a_command_of_every_boss_out_with_null(scripted_llm):
    boss = AbstractBossFlow.instantiate_from_default_config(
        subflows_config={"CtrlExMem": {"commands": {"re_plan": None, "search_logs": None}}}
    )
    loop = boss.subflows["CtrlExMem"]
    assert listed(loop) == ["ask_user", "update_plan", "finish"]
    assert set(loop.subflows["Executor"].subflows) == {"ask_user", "update_plan"}
    with pytest.raises(ConfigurationError, match=r"Executor.subflows_config.re_plan: no command"):
        AbstractBossFlow.instantiate_from_default_config(
            subflows_config={
                "CtrlExMem": {
                    "commands": {"re_plan": None},
                    "subflows_config": {"Executor": {"subflows_config": {"re_plan": {"max_rounds": 3}}}},
                }
            }
        )


def test_the_old_override_paths_and_the_new_one_reach_the_flow_and_the_old_wins(scripted_llm):
    new = {
        "subflows_config": {
            "CtrlExMem": {
                "commands": {"Coder": {"flow": {"subflows_config": {"CtrlExMem": {"max_rounds": 8, "max_repeats": 5}}}}}
            }
        }
    }
    old = {
        "subflows_config": {
            "CtrlExMem": {
                "subflows_config": {
                    "Executor": {"subflows_config": {"Coder": {"subflows_config": {"CtrlExMem": {"max_rounds": 7}}}}},
                    "Controller": {"commands": {"ask_user": {"description": "Ask Ada."}}},
                }
            }
        }
    }
    assert coder_loop(JarvisFlow.instantiate_from_default_config(**new)).flow_config["max_rounds"] == 8
    assert coder_loop(JarvisFlow.instantiate_from_default_config(**old)).flow_config["max_rounds"] == 7
    both = JarvisFlow.instantiate_from_default_config(
        subflows_config={"CtrlExMem": {**new["subflows_config"]["CtrlExMem"], **old["subflows_config"]["CtrlExMem"]}}
    )
    assert coder_loop(both).flow_config["max_rounds"] == 7 and coder_loop(both).flow_config["max_repeats"] == 5
    ask = {c.name: c for c in both.subflows["CtrlExMem"].subflows["Controller"].commands}["ask_user"]
    assert ask.description == "Ask Ada." and ask.input_args == ["question"], "the old path overrides the description"


def test_a_walk_of_a_configuration_visits_the_flows_its_commands_name(tmp_path, scripted_llm):
    """set_memory_files fills `memory_files: ???` in a command's flow given in the configuration."""
    config = {
        "flow": {
            "_target_": "aiflows_jarvis.AbstractBossFlowModule.AbstractBossFlow.instantiate_from_default_config",
            "name": "Boss",
            "memory_files": "???",
            "memory_file_names": {"plan": "plan_b.txt", "logs": "logs_b.txt"},
            "subflows_config": {
                "CtrlExMem": {
                    "commands": {
                        "Coder": {
                            "description": "Code.",
                            "input_args": ["goal"],
                            "flow": {
                                "_target_": "aiflows_jarvis.CoderFlowModule.CoderFlow.instantiate_from_default_config",
                                "memory_files": "???",
                            },
                        }
                    }
                }
            },
        }
    }
    done = set_memory_files(config, str(tmp_path))
    assert done["Boss/CtrlExMem/Executor/Coder"]["plan"] == str(tmp_path / "plan_coder.txt")
    paths = [path for path, _, _ in walk_config(config["flow"])]
    assert "Boss/CtrlExMem/Executor/Coder/CtrlExMem/Executor/extend_library" not in paths, "only what is given"
    boss = AbstractBossFlow.instantiate_from_default_config(
        **{k: v for k, v in config["flow"].items() if k != "_target_"}
    )
    coder = boss.subflows["CtrlExMem"].subflows["Executor"].subflows["Coder"]
    assert coder.flow_config["memory_files"]["logs"] == str(tmp_path / "logs_coder.txt")


# ~~~ What does not pair up ~~~
@pytest.mark.parametrize(
    "overrides, says",
    [
        (
            {"CtrlExMem": {"commands": {"shout": {"description": "Shout.", "input_args": ["text"]}}}},
            "Jarvis.subflows_config.CtrlExMem.commands.shout: no flow.",
        ),
        (
            {
                "CtrlExMem": {
                    "commands": {
                        "Coder": {
                            "flow": {"subflows_config": {"CtrlExMem": {"commands": {"run_code": {"flow": None}}}}}
                        }
                    }
                }
            },
            f"{CODER}.commands.run_code: no flow.",
        ),
        (
            {"CtrlExMem": {"subflows_config": {"Controller": {"commands": {"shout": {"description": "Shout."}}}}}},
            "Jarvis.subflows_config.CtrlExMem.subflows_config.Controller.commands.shout: no flow.",
        ),
    ],
)
def test_a_command_without_a_flow_is_refused_with_its_key(overrides, says, scripted_llm):
    with pytest.raises(ConfigurationError) as refused:
        JarvisFlow.instantiate_from_default_config(subflows_config=overrides)
    assert str(refused.value).startswith(says), str(refused.value)
    assert "flow: {_target_: package.Class.instantiate_from_default_config" in str(refused.value), "what to do"


@pytest.mark.parametrize(
    "overrides, says",
    [
        (
            {"CtrlExMem": {"subflows_config": {"Executor": {"subflows_config": {"shout": {"_target_": WORDS}}}}}},
            "Jarvis.subflows_config.CtrlExMem.subflows_config.Executor.subflows_config.shout: no command.",
        ),
        (
            {
                "CtrlExMem": {
                    "subflows_config": {
                        "Executor": {
                            "subflows_config": {
                                "Coder": {
                                    "subflows_config": {
                                        "CtrlExMem": {
                                            "subflows_config": {
                                                "Executor": {"subflows_config": {"run_cod": {"timeout": 5}}}
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            },
            f"{CODER}.subflows_config.Executor.subflows_config.run_cod: no command.",
        ),
    ],
)
def test_a_branch_without_a_command_is_refused_with_its_key(overrides, says, scripted_llm):
    with pytest.raises(ConfigurationError) as refused:
        JarvisFlow.instantiate_from_default_config(subflows_config=overrides)
    assert str(refused.value).startswith(says), str(refused.value)
    assert "declare it under" in str(refused.value)


def test_finish_is_run_by_the_loop_and_takes_no_flow():
    with pytest.raises(ConfigurationError, match=r"^Loop.commands.finish: `finish` is run by the loop itself"):
        ControllerExecutorFlow.instantiate_from_default_config(
            name="Loop", commands={"finish": {"flow": {"_target_": WORDS}}}
        )


def test_run_jarvis_refuses_a_command_without_a_flow_at_start_naming_its_key(tmp_path):
    from helpers import NO_SERVER, assert_refused_at_start, run_jarvis

    memory = tmp_path / "memory"
    memory.mkdir()
    (memory / "plan_jarvis.txt").write_text("1. the earlier run's plan\n")
    (tmp_path / "mine.yaml").write_text(
        "flow:\n  _target_: aiflows_jarvis.JarvisFlowModule.JarvisFlow.instantiate_from_default_config\n"
        "  name: Jarvis\n  subflows_config:\n    CtrlExMem:\n      commands:\n"
        "        shout: {description: Shout., input_args: [text]}\n"
    )
    done = run_jarvis(tmp_path, "--config", "mine.yaml", *NO_SERVER, "a goal")
    assert_refused_at_start(done, memory, "mine.yaml: Jarvis.subflows_config.CtrlExMem.commands.shout: no flow.")


# ~~~ The run's tools: offered at the controller's first call, run by one branch ~~~
class Provider:
    """A run's tool provider that counts how often it is asked."""

    def __init__(self):
        self.asked = []

    def commands(self, taken):
        self.asked.append(set(taken))
        return {
            "srv__greet": {
                "description": "Greet someone.",
                "input_args": ["name"],
                "shown_as": "srv__greet (MCP server srv)",
            },
            "count_words": {"description": "A tool named like a command of the loop.", "input_args": []},
        }


def test_a_loop_offers_the_runs_tools_at_its_controllers_first_call_and_runs_them_in_one_branch(
    scripted_llm, run_context
):
    screen = Sink()
    run_context.console = Console(stream=screen, color=False)
    provider = Provider()
    run_context.tool_provider = provider
    loop = ControllerExecutorFlow.instantiate_from_default_config(
        commands={"count_words": {"description": "Count words.", "input_args": ["text"], "flow": {"_target_": WORDS}}},
        tools={"result_keys": ["result"], "flow": {"_target_": ECHO_TOOLS}},
    )
    assert provider.asked == [], "listing may start servers: not when the loop is built"
    scripted_llm.add(command("srv__greet", name="Ada"), finish("greeted"))
    out = loop.call({"goal": "greet Ada", "plan": "", "logs": "", "memory_files": {}})
    assert out["status"] == "finished"
    assert len(provider.asked) == 1 and "count_words" in provider.asked[0], "asked once, told the loop's commands"
    head = system_message(scripted_llm.calls[0]["messages"])
    assert "srv__greet: Greet someone. Input arguments: name" in head
    assert "A tool named like a command" not in head, "a loop's own command is not replaced by a tool"
    assert 'ran srv__greet with {"name": "Ada"}' in scripted_llm.calls[1]["messages"][-1]["content"], (
        "the tools branch ran it, told which tool and with what"
    )
    assert "srv__greet (MCP server srv)" in screen.text, "the step line names the server"
    schema = loop.subflows["Controller"].response_format("json_schema")["json_schema"]["schema"]
    assert "srv__greet" in schema["properties"]["command"]["enum"], "the reply schema offers it"

    scripted_llm.add(finish("again"))
    loop.call({"goal": "again", "plan": "", "logs": "", "memory_files": {}})
    assert len(provider.asked) == 1, "listed once per run, and kept"


def test_a_loop_without_a_tool_provider_offers_nothing_more(scripted_llm):
    loop = ControllerExecutorFlow.instantiate_from_default_config(tools={"flow": {"_target_": ECHO_TOOLS}})
    scripted_llm.add(finish())
    loop.call({"goal": "g", "plan": "", "logs": "", "memory_files": {}})
    assert [c.name for c in loop.subflows["Controller"].commands] == ["finish"]
