"""The hub README of a module, written from its class docstrings and default configurations (as aiflows builds
them, inherited from a base class of these modules where a class's own YAML says nothing)."""

from __future__ import annotations

import ast
import json
import os
from typing import List, Optional, Set, Tuple

import yaml

from .demos import DEMOS
from .source import (
    MODULE_REFERENCE,
    MODULES_DIR,
    dependency_closure,
    direct_dependencies,
    flow_classes,
    requirements,
    rewrite,
)


def _class_docstring(module: str, cls: str) -> str:
    with open(os.path.join(MODULES_DIR, module, f"{cls}.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return ast.get_docstring(node) or ""
    return ""


def _base_names(module: str, cls: str) -> List[str]:
    with open(os.path.join(MODULES_DIR, module, f"{cls}.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return [ast.unparse(b) for b in node.bases]
    return []


def _default_config(module: str, cls: str) -> dict:
    with open(os.path.join(MODULES_DIR, module, f"{cls}.yaml"), encoding="utf-8") as f:
        return yaml.safe_load(f) or {}


def base_flow_class(module: str, cls: str) -> Optional[Tuple[str, str]]:
    """(module, class) of a flow class's base class when that is a flow class of these modules, found from the
    imports of the class's file; None for a base from aiflows or elsewhere."""
    bases = _base_names(module, cls)
    if not bases:
        return None
    base = bases[0]  # aiflows builds a default configuration from `cls.__base__`, the first base
    with open(os.path.join(MODULES_DIR, module, f"{cls}.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) != base:
                    continue
                if node.level == 1:
                    owner = module  # from .Other import Base
                else:
                    found = MODULE_REFERENCE.match(node.module or "") if node.level == 0 else None
                    owner = found.group(1) if found else None
                if owner and alias.name in flow_classes(owner):
                    return owner, alias.name
        elif isinstance(node, ast.ClassDef) and node.name == base and base in flow_classes(module):
            return module, base
    return None


def inherited_value(module: str, cls: str, key: str) -> Tuple[Optional[object], Optional[str]]:
    """``key`` of a flow class's default configuration as aiflows builds it (the class's YAML merged over its base
    classes'; a list replaces the base's whole) and the class whose YAML sets it; (None, None) if none of the base
    classes of these modules sets it."""
    seen: Set[Tuple[str, str]] = set()
    current: Optional[Tuple[str, str]] = (module, cls)
    while current is not None and current not in seen:
        seen.add(current)
        config = _default_config(*current)
        if key in config:
            return config[key], current[1]
        current = base_flow_class(*current)
    return None, None


def _interface_lines(module: str, cls: str, keys: Tuple[str, ...]) -> List[str]:
    """The README list of an interface: the first of ``keys`` the class's default configuration has (a chat's
    `input_interface_non_initialized` stands in when it declares no `input_interface`), inherited or not."""
    for key in keys:
        value, owner = inherited_value(module, cls, key)
        if value is not None:
            lines = [f"- `{k}`" for k in value] or ["- (none)"]
            return lines + ([] if owner == cls else ["", f"(inherited from `{owner}`)"])
    bases = _base_names(module, cls)
    return [f"- as declared by its base class `{bases[0]}` (see its documentation)" if bases else "- (none)"]


def _parameter_lines(
    config: dict, skip=("name", "description", "input_interface", "output_interface", "subflows_config", "topology")
) -> List[str]:
    out = []
    for key, value in config.items():
        if key in skip:
            continue
        if isinstance(value, dict) and "template" in value:
            text = "a Jinja template (see the default configuration)"
        else:
            text = json.dumps(value, default=str)
            text = text if len(text) <= 100 else text[:97] + "..."
        out.append(f"- `{key}`: `{text}`" if not text.startswith("a Jinja") else f"- `{key}`: {text}")
    return out


def _literal(value) -> str:
    """``value`` as Python source: on one line when short, else indented like JSON, when JSON reads back the same (no
    true/false/null)."""
    text = json.dumps(value)
    if len(text) > 72:
        text = json.dumps(value, indent=4)
    try:
        if ast.literal_eval(text) == value:
            return text
    except (ValueError, SyntaxError):
        pass
    return repr(value)


# The user's first sync, FlowVerse's: in a project without flow.mod it writes `*` over a `flow_modules/.gitignore`
# the user keeps there (the module's own sync of its dependencies, on import, only appends lines).
KEEP_GITIGNORE = [
    "# a project's first FlowVerse sync writes `*` over flow_modules/.gitignore: a file of yours is put back",
    'gitignore = os.path.join("flow_modules", ".gitignore")',
    "kept = open(gitignore).read() if os.path.exists(gitignore) else None",
    "flow_verse.sync_dependencies(dependencies)",
    "if kept is not None:",
    '    with open(gitignore, "w") as f:',
    "        f.write(kept)",
]


def how_to_use(module: str, namespace: str, sync: List[str]) -> List[str]:
    """The lines of a README's "How to use" snippet: sync the module, then (for a module with a demo) everything a
    call needs, in the order that works: the run (``RunContext``: the api_infos of every chat, the input source), then
    in it the flow, the memory folder of every boss (the run's ``memory_dir``), and a call with the demo's input."""
    spec = DEMOS.get(module)
    classes = flow_classes(module)
    lines = [
        "import os",
        "",
        "from aiflows import flow_verse",
        "",
        *sync,
        *KEEP_GITIGNORE,
        "",
        f"from flow_modules.{namespace}.{module} import {', '.join(classes) or '*'}  # before litellm",
    ]
    if spec is None:
        return lines
    llm = spec.get("llm", False)  # its demo's chats need api_infos (the vector store's demo embeds with local vectors)
    if llm:
        lines += [
            "from aiflows.backends.api_info import ApiInfo",
            f"from flow_modules.{namespace}.ChatFlowModule import with_api_infos",
        ]
    core = ["AutoApproveInput", "RunContext"]
    lines += [f"from flow_modules.{namespace}.CoreFlowModule import {', '.join(core)}", ""]
    if llm:
        lines += [
            "# every chat of the flow: OPENAI_API_KEY, or OPENAI_API_BASE for an OpenAI-compatible server (then "
            "no key is needed)",
            'key, base = os.environ.get("OPENAI_API_KEY"), os.environ.get("OPENAI_API_BASE")',
            "if not (key or base):",
            '    raise SystemExit("Set OPENAI_API_KEY, or OPENAI_API_BASE for an OpenAI-compatible server '
            '(vLLM, Ollama, ...)")',
            'api = ApiInfo(backend_used="openai", api_key=key or "sk-no-key-needed", api_base=base)',
        ]
    if spec.get("overrides"):
        lines.append(rewrite(f"overrides = {_literal(spec['overrides'])}", namespace))
    memory = spec.get("memory")
    lines += [
        "# the run: every chat's backend, who answers (AutoApproveInput approves plans and code; leave it out to",
        "# review them yourself)"
        + (", and the memory folder of every boss (its plan, logs and code library)" if memory else ""),
        "with RunContext("
        + ("backend_factory=with_api_infos([api]), " if llm else "")
        + "input_source=AutoApproveInput()"
        + (', memory_dir="memory"' if memory else "")
        + "):",
        f"    flow = {spec['cls']}.instantiate_from_default_config({'**overrides' if spec.get('overrides') else ''})",
    ]
    call = _literal(spec["input"]).replace("\n", "\n    ")  # inside the `with` block
    lines.append(f"    print(flow.call({call}))")
    return lines


def readme(module: str, namespace: str, revision: str, local_dir: Optional[str] = None) -> str:
    """The hub README: front matter, what the module is, how to use it, and for each flow class its docstring, its
    configuration parameters and its input and output interfaces (from the default configuration, or the base
    class's it inherits them from). With ``local_dir`` (the staged namespace folder of a --local staging), the
    snippet syncs the module from there instead of from the hub."""
    with open(os.path.join(MODULES_DIR, module, "__init__.py"), encoding="utf-8") as f:
        about = ast.get_docstring(ast.parse(f.read())) or module
    deps = sorted(direct_dependencies(module))
    reqs = requirements(module)
    classes = flow_classes(module)
    if local_dir is not None:
        where = json.dumps(os.path.join(local_dir, module))
        sync = [f'dependencies = [{{"url": "{namespace}/{module}", "revision": {where}}}]  # staged on this machine']
    else:
        sync = [f'dependencies = [{{"url": "{namespace}/{module}", "revision": "{revision}"}}]']
    main_class = DEMOS.get(module, {}).get("cls") or (classes[0] if classes else None)
    parts = ["---", "license: mit", "---", "", f"# {module}", "", about, "", "## How to use", ""]
    parts += ["```python"] + how_to_use(module, namespace, sync) + ["```", ""]
    parts += [
        "Import a module of this namespace before `aiflows.backends` or `litellm`: it points litellm at the tokenizer "
        "the CoreFlowModule carries, so nothing is downloaded, and litellm imports quietly, without its price-list "
        "request. Once a module has been imported on a machine, the other order works offline too: the tokenizer is "
        "copied where tiktoken looks for it (`TIKTOKEN_CACHE_DIR`, else `DATA_GYM_CACHE_DIR`, else "
        "`<tmp>/data-gym-cache`; `AIFLOWS_JARVIS_NO_TOKENIZER_SEED=1` turns the copy off).",
        "",
    ]
    if main_class and DEMOS.get(module, {}).get("llm"):
        # quick_load fills `api_infos: ???` keys, which a composite flow's default configuration does not have at
        # its top: the skeleton puts one at every chat of the tree.
        embeddings = "VectorStoreFlowModule" in dependency_closure([module])
        parts += [
            "Instead of `RunContext(backend_factory=...)`, aiflows' `quick_load` can fill the chats' "
            "`backend.api_infos: ???`"
            + (" (and the vector store's embeddings' `embedding.api_infos: ???`)" if embeddings else "")
            + ". A flow's default configuration has them only at each chat, deep in its tree, so build a "
            "configuration with one at every chat first (`chat_backends_skeleton`), fill it, and instantiate from it:",
            "",
            "```python",
            "from aiflows.utils.general_helpers import quick_load",
            f"from flow_modules.{namespace}.CoreFlowModule import chat_backends_skeleton",
            "",
            f'cfg = chat_backends_skeleton("flow_modules.{namespace}.{module}.{main_class}'
            '.instantiate_from_default_config")',
            'cfg.pop("_target_")',
            "quick_load(cfg, [api])",
            f"flow = {main_class}.instantiate_from_default_config(**cfg)",
            "```",
            "",
            *(
                [
                    f"Or give every vector store of the run its embeddings at once: `RunContext(embeddings_factory="
                    f"embeddings_with_api_infos([api]))` (`flow_modules.{namespace}.VectorStoreFlowModule`).",
                    "",
                ]
                if embeddings
                else []
            ),
        ]
    parts += [
        "`demo.yaml` and `run.py` run the module on its own: `python run.py` in this folder.",
        "",
        f"Depends on: {', '.join(f'{namespace}/{d}' for d in deps) or 'nothing but aiflows'}. "
        f"Needs beyond aiflows: {', '.join(reqs) or 'nothing'} (see `pip_requirements.txt`).",
        "",
    ]
    for cls in classes:
        own = _default_config(module, cls)
        doc = _class_docstring(module, cls)
        parts += [f"## {cls}", "", f"`class {cls}({', '.join(_base_names(module, cls))})`", "", doc, ""]
        parts += ["### Configuration parameters (this class's default configuration)", ""]
        # a value may name a flow (`tools: {flow: {_target_: ...}}`): in the namespace's import path, as below
        parts += [rewrite(line, namespace) for line in _parameter_lines(own)] or ["- (none beyond its base class's)"]
        subflows = own.get("subflows_config") or {}
        if subflows:
            parts += [f"- `subflows_config`: {', '.join(f'`{s}`' for s in subflows)}"]
        parts += ["", "### Input interface", ""]
        parts += _interface_lines(module, cls, ("input_interface", "input_interface_non_initialized"))
        parts += ["", "### Output interface", ""]
        parts += _interface_lines(module, cls, ("output_interface",))
        parts += [
            "",
            "<details><summary>Default configuration</summary>",
            "",
            "```yaml",
            rewrite(yaml.safe_dump(own, sort_keys=False, width=120), namespace).rstrip(),
            "```",
            "",
            "</details>",
            "",
        ]
    return "\n".join(parts).rstrip() + "\n"
