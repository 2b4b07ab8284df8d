"""Static checks of every module: every `_target_` imports, every flow class instantiates from its default config,
every prompt template renders with its declared variables (and fails on an undefined one), every loop's controller
commands and executor branches are derived from its one declaration of each command, and no module syncs
dependencies at import."""

from __future__ import annotations

import glob
import importlib
import os
import re

import pytest
import yaml
from aiflows.base_flows import CircularFlow
from hydra._internal.utils import _locate

from aiflows_jarvis.AbstractBossFlowModule import CtrlExMemFlow
from aiflows_jarvis.ChatFlowModule import ChatAtomicFlow
from aiflows_jarvis.ControllerFlowModule import ControllerAtomicFlow, ControllerExecutorFlow
from aiflows_jarvis.ControllerFlowModule.command_config import TOOLS_BRANCH
from aiflows_jarvis.CoreFlowModule import ConfigurationError, StrictJinjaPrompt
from aiflows_jarvis.HumanStandardInputFlowModule import HumanStandardInputFlow

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULES_DIR = os.path.join(ROOT, "flow_modules", "aiflows_jarvis")
MODULES = sorted(
    d for d in os.listdir(MODULES_DIR) if d.endswith("Module") and os.path.isdir(os.path.join(MODULES_DIR, d))
)
YAMLS = sorted(glob.glob(os.path.join(MODULES_DIR, "*", "*.yaml")))
REGISTRIES = (
    CircularFlow._CircularFlow__input_msg_payload_builder_registry,
    CircularFlow._CircularFlow__output_msg_payload_processor_registry,
)


def flow_classes():
    """(module, class) for every `<Class>.yaml` beside a `<Class>.py` that defines a flow."""
    out = []
    for path in YAMLS:
        module_dir, stem = os.path.basename(os.path.dirname(path)), os.path.splitext(os.path.basename(path))[0]
        if os.path.exists(os.path.join(os.path.dirname(path), f"{stem}.py")):
            module = importlib.import_module(f"aiflows_jarvis.{module_dir}")
            out.append(pytest.param(getattr(module, stem), id=f"{module_dir}.{stem}"))
    return out


def walk(flow):
    yield flow
    for sub in getattr(flow, "subflows", {}).values():
        yield from walk(sub)


def targets(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "_target_":
                yield value
            else:
                yield from targets(value)
    elif isinstance(node, list):
        for item in node:
            yield from targets(item)


@pytest.mark.parametrize("module", MODULES)
def test_every_module_imports_declares_dependencies_and_does_not_sync(module):
    imported = importlib.import_module(f"aiflows_jarvis.{module}")
    assert isinstance(imported.dependencies, list)
    with open(os.path.join(MODULES_DIR, module, "__init__.py")) as f:
        assert "sync_dependencies(" not in f.read(), "DESIGN section 3: no hub sync at import"
    assert os.path.exists(os.path.join(MODULES_DIR, module, "pip_requirements.txt"))


@pytest.mark.parametrize("path", YAMLS, ids=lambda p: os.path.relpath(p, MODULES_DIR))
def test_every_target_in_every_yaml_imports(path):
    with open(path) as f:
        config = yaml.safe_load(f)
    package = "aiflows_jarvis." + os.path.basename(os.path.dirname(path))
    for target in targets(config):
        if target.startswith("."):
            target = package + target
        if "." in target and target.split(".")[0] in {"aiflows_jarvis", "aiflows"}:
            assert _locate(target) is not None, target
        elif target.startswith("langchain_"):  # a LangChain tool (AutoGPT's extra)
            pytest.importorskip(target.split(".")[0], reason='LangChain is not installed: pip install -e ".[autogpt]"')
            assert _locate(target) is not None, target
        else:  # a topology interface registered with CircularFlow's decorators: `DefiningClass.method`
            assert any(target in registry for registry in REGISTRIES), f"{target} is not a registered interface"


@pytest.mark.parametrize("cls", flow_classes())
def test_every_flow_instantiates_from_its_default_config_and_its_templates_render(cls, scripted_llm):
    flow = cls.instantiate_from_default_config()
    for sub in walk(flow):
        if isinstance(sub, ChatAtomicFlow):
            # what the chat adds to its input: the working folder; a controller also its plan file and whether its
            # loop does the bookkeeping
            derived = {"workdir"} | (
                {"plan_file_location", "bookkeeping_by_code"} if isinstance(sub, ControllerAtomicFlow) else set()
            )
            checks = [
                (sub.system_message_prompt_template, sub.flow_config["input_interface_non_initialized"]),
                (sub.init_human_message_prompt_template, sub.flow_config["input_interface_non_initialized"]),
                (sub.human_message_prompt_template, sub.flow_config["input_interface_initialized"]),
            ]
            if isinstance(sub, ControllerAtomicFlow):
                checks.append((sub.correction_prompt, ["problem", "example", "commands"]))
        elif isinstance(sub, HumanStandardInputFlow):
            derived = set()
            checks = [(sub.query_message_prompt_template, sub.flow_config["input_interface"])]
        else:
            continue
        for prompt, interface in checks:
            where = f"{cls.__name__}/{sub.flow_config['name']}"
            assert not prompt.undeclared(), f"{where}: template uses undeclared {prompt.undeclared()}"
            missing = set(prompt.input_variables) - set(interface) - derived
            assert not missing, f"{where}: template variables {missing} are not in the input interface"
            rendered = prompt.format(**{v: f"<{v}>" for v in prompt.input_variables})
            for variable in prompt.input_variables:
                if re.search(r"\{\{[^}]*\b%s\b" % re.escape(variable), prompt.template):  # shown, not only tested
                    assert f"<{variable}>" in rendered, f"{where}: {variable} is not rendered"


@pytest.mark.parametrize("cls", flow_classes())
def test_every_loop_derives_its_controller_commands_and_its_branches_from_its_commands(cls, scripted_llm):
    for sub in walk(cls.instantiate_from_default_config()):
        if isinstance(sub, ControllerExecutorFlow):
            where = f"{cls.__name__}/{sub.flow_config['name']}"
            declared = sub.flow_config["commands"]
            assert all("flow" not in spec for spec in declared.values()), f"{where}: the flows are the branches now"
            controller = {c.name: c for c in sub.subflows["Controller"].commands}
            assert set(controller) == set(declared) | {"finish"}, where
            for name, spec in declared.items():
                assert controller[name].description == " ".join(str(spec["description"]).split()), (where, name)
                assert controller[name].input_args == list(spec.get("input_args") or []), (where, name)
            branches = set(sub.subflows["Executor"].subflows)
            tools = {TOOLS_BRANCH} if sub.flow_config.get("tools") is not None else set()  # runs every tool offered
            assert branches == set(controller) - set(sub.LOOP_COMMANDS) | tools, where
            assert branches == set(sub.flow_config["subflows_config"]["Executor"]["subflows_config"]), where


@pytest.mark.parametrize("cls", flow_classes())
def test_no_docstring_repeats_the_commands_its_configuration_declares(cls, scripted_llm):
    """A class's docstring points to the configuration that declares its loop's commands: naming three or more of
    them is a copy of the list, which drifts (Jarvis's had no search_logs, Coder's no search_library)."""
    flow = cls.instantiate_from_default_config()
    loops = [f for f in [flow, *getattr(flow, "subflows", {}).values()] if isinstance(f, ControllerExecutorFlow)]
    names = {c.name for loop in loops for c in loop.subflows["Controller"].commands}
    named = {name for name in names if f"`{name}`" in (cls.__doc__ or "")}
    assert len(named) < 3, f"{cls.__name__}'s docstring lists {sorted(named)}: point to its YAML instead"


def yaml_nodes(node, path=()):
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from yaml_nodes(value, path + (key,))


@pytest.mark.parametrize("path", YAMLS, ids=lambda p: os.path.relpath(p, MODULES_DIR))
def test_no_module_yaml_declares_a_command_in_two_places(path):
    """A command is declared once, in a loop's `commands` with its flow: no YAML gives a controller commands of its
    own (but ControllerAtomicFlow's default `finish`) or an executor a branch's flow (a `_target_`); overriding a
    command's flow there (the original configuration's override points) is fine. A boss's YAML changes or leaves out
    (`null`) the commands every boss has (CtrlExMemFlow.yaml) without declaring them again."""
    every_boss = CtrlExMemFlow.get_config()["commands"]
    module, stem = os.path.basename(os.path.dirname(path)), os.path.splitext(os.path.basename(path))[0]
    cls = getattr(importlib.import_module(f"aiflows_jarvis.{module}"), stem, None)
    a_boss_loop = isinstance(cls, type) and issubclass(cls, CtrlExMemFlow) and cls is not CtrlExMemFlow
    with open(path) as f:
        config = yaml.safe_load(f)
    for keys, node in yaml_nodes(config):
        if keys[-2:] == ("Executor", "subflows_config"):
            assert not any("_target_" in (branch or {}) for branch in node.values()), keys
        if keys[-1:] == ("Controller",):
            assert "commands" not in node, keys
        if keys[-1:] == ("commands",) and not path.endswith("ControllerAtomicFlow.yaml"):
            for name, spec in node.items():
                if name in every_boss and (keys[-2:] == ("CtrlExMem", "commands") or a_boss_loop):
                    repeated = [key for key, value in (spec or {}).items() if every_boss[name].get(key) == value]
                    assert not repeated, f"{keys}.{name}: {repeated} as in CtrlExMemFlow.yaml: give what differs"
                    continue
                assert name == "finish" or "flow" in spec, f"{keys}: {name} names no flow"


def test_a_strict_template_fails_on_an_undefined_variable():
    prompt = StrictJinjaPrompt(template="Hello {{name}}, {{typo}}", input_variables=["name"])
    assert prompt.undeclared() == {"typo"}
    with pytest.raises(ConfigurationError, match="'typo' is undefined"):
        prompt.format(name="Ada")
