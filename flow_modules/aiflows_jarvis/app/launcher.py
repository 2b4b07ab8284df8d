"""What a launcher needs: credentials from the environment, model names litellm 1.0.0 accepts, the
configuration, the memory folder (a new run or a resumed one), and the clean-up of interpreters.

Both command lines (``jarvis``, ``autogpt``) are built on these; they are importable for other launchers.
"""

from __future__ import annotations

import copy
import os
import shutil
import time
from typing import Any, Dict, Iterator, List, Optional

from aiflows_jarvis.CodeLibraryFlowModule import package_dir
from aiflows_jarvis.CoreFlowModule import (  # noqa: F401  (tests import it here)
    BadInputError,
    ConfigurationError,
    JarvisError,
    set_memory_files,
    shorten,
    sweep_temporary_files,
)

# When no configuration file is at hand (an install without the repository's configuration folder): Jarvis's
# own defaults.
DEFAULT_FLOW_CONFIG = {
    "flow": {"_target_": "aiflows_jarvis.JarvisFlowModule.JarvisFlow.instantiate_from_default_config", "name": "Jarvis"}
}
NO_KEY_PLACEHOLDER = "sk-no-key-needed"


def no_credentials_help(app: str = "Jarvis", command: str = "jarvis", server_note: str = "") -> str:
    """What to do when no LLM is configured, naming the command as the user started it (``command``: ``jarvis`` or
    ``python run_jarvis.py``); ``server_note`` says what else a server must serve (AutoGPT: embeddings)."""
    return f"""\
{app} needs an LLM, and none is configured. Either set an API key:
  export OPENAI_API_KEY=sk-...            (OpenAI; --model picks the model, gpt-4 by default)
  export AZURE_API_KEY=... AZURE_API_BASE=https://<resource>.openai.azure.com AZURE_API_VERSION=2023-07-01-preview
                                          (Azure OpenAI; --model is your deployment name)
or point {app} at an OpenAI-compatible server{server_note} (vLLM, llama.cpp, Ollama, ...):
  {command} --api-base http://localhost:8000/v1 --model <model name> "<goal>"
To see {app} work without any LLM, replay the recorded demo: {command} --demo"""


NO_CREDENTIALS_HELP = no_credentials_help()


class MissingCredentials(JarvisError):
    """No API key and no --api-base."""


def api_infos_from_environment(
    api_base: Optional[str] = None, environ: Optional[Dict[str, str]] = None, help_text: str = NO_CREDENTIALS_HELP
) -> List[Any]:
    """The ApiInfo to use, from ``--api-base`` and the usual environment variables; MissingCredentials (saying
    ``help_text``) if none."""
    from aiflows.backends.api_info import ApiInfo

    env = os.environ if environ is None else environ
    if api_base:
        return [
            ApiInfo(
                backend_used="openai",
                api_base=api_base.rstrip("/"),
                api_key=env.get("OPENAI_API_KEY") or NO_KEY_PLACEHOLDER,
            )
        ]
    if env.get("OPENAI_API_KEY"):
        return [
            ApiInfo(backend_used="openai", api_key=env["OPENAI_API_KEY"], api_base=env.get("OPENAI_API_BASE") or None)
        ]
    azure_key = env.get("AZURE_API_KEY") or env.get("AZURE_OPENAI_API_KEY")
    if azure_key:
        base = env.get("AZURE_API_BASE") or env.get("AZURE_OPENAI_ENDPOINT")
        if not base:
            raise MissingCredentials(
                "AZURE_API_KEY is set but AZURE_API_BASE is not: set it to your resource's "
                "endpoint, e.g. https://<resource>.openai.azure.com"
            )
        return [
            ApiInfo(
                backend_used="azure",
                api_key=azure_key,
                api_base=base,
                api_version=env.get("AZURE_API_VERSION") or "2023-07-01-preview",
            )
        ]
    raise MissingCredentials(help_text)


SCRIPT_CREDENTIALS_HELP = """\
No LLM is configured. Set one of:
  OPENAI_API_KEY=sk-...                      (OpenAI)
  OPENAI_API_BASE=http://localhost:8000/v1   (an OpenAI-compatible server: vLLM, llama.cpp, Ollama, ...; with
                                              OPENAI_API_KEY too if the server wants one)
  AZURE_API_KEY, AZURE_API_BASE and AZURE_API_VERSION   (Azure OpenAI)"""


def api_infos_for_scripts(environ: Optional[Dict[str, str]] = None) -> List[Any]:
    """The api_infos a script of the user's gives its chats (``with_api_infos``), read from the environment as the
    command line reads it, with ``OPENAI_API_BASE`` in the place of ``--api-base`` (so a local server needs no key).
    MissingCredentials, naming the variables to set, when none is set.

    :param environ: the variables to read (default: ``os.environ``).
    """
    env = os.environ if environ is None else environ
    return api_infos_from_environment(env.get("OPENAI_API_BASE") or None, env, SCRIPT_CREDENTIALS_HELP)


#: Where the password of an --api-base comes from when the command line does not give it (--resume: it is never
#: stored in the run file).
API_BASE_PASSWORD = "JARVIS_API_BASE_PASSWORD"


def api_base_with_password(
    api_base: str, had_password: bool = False, run_file: str = "the run file", environ: Optional[Dict[str, str]] = None
) -> str:
    """The --api-base to use. One that holds its password (``http://user:PASSWORD@host/v1``) is used as given;
    else the password comes from ``$JARVIS_API_BASE_PASSWORD`` when the URL names a user or the run resumed had a
    password (``had_password``); BadInputError saying how to give it when the resumed run had one and it is not set.

    :param api_base: the URL, as given or as the run file keeps it (without its password).
    :param had_password: whether the run file says the URL of the resumed run held a password.
    :param run_file: the run file, named in the message.
    :param environ: the environment (default ``os.environ``).
    """
    from urllib.parse import urlsplit

    from aiflows_jarvis.CoreFlowModule import url_password, with_credentials

    if url_password(api_base):
        return api_base
    secret = (os.environ if environ is None else environ).get(API_BASE_PASSWORD)
    try:
        user = urlsplit(api_base).username
    except ValueError:
        user = None
    if secret and (had_password or user):
        return with_credentials(api_base, secret)
    if had_password:
        raise BadInputError(
            f"The run --resume continues used --api-base with a password, which is kept in no file ({run_file} "
            f"has {api_base}). Give it again: set {API_BASE_PASSWORD}=<password> (or give --api-base with the "
            "password in it) and --resume again."
        )
    return api_base


#: Where the passwords of the URLs of a goal come from on --resume (they are never stored in the run file).
GOAL_PASSWORD = "JARVIS_GOAL_PASSWORD"
GOAL_SECRET = "password in the goal"


def goal_without_passwords(goal: str) -> tuple:
    """``goal`` with the secret of each URL's user part taken out (``http://bob:pw@host`` -> ``http://bob@host``), as
    the run file keeps it, and those URLs as left there (where ``goal_with_passwords`` puts the secrets back)."""
    from aiflows_jarvis.CoreFlowModule import urls_with_secrets, without_credentials

    urls = []
    for url in urls_with_secrets(goal):
        bare = without_credentials(url)[0]
        goal = goal.replace(url, bare)
        urls.append(bare)
    return goal, urls


def goal_with_passwords(
    goal: str, urls: Any, run_file: str = "the run file", environ: Optional[Dict[str, str]] = None
) -> str:
    """The goal of a resumed run with the passwords of its URLs put back, from ``$JARVIS_GOAL_PASSWORD`` (several:
    separated by spaces, in the order of the URLs); the goal as it is when it has them already (given again).
    BadInputError saying how to give them when they are missing.

    :param goal: the goal, as the run file keeps it or as given again.
    :param urls: the run file's ``goal_passwords``: the URLs without their passwords.
    """
    from aiflows_jarvis.CoreFlowModule import with_credentials

    missing = [url for url in (urls if isinstance(urls, list) else []) if isinstance(url, str) and url in goal]
    if not missing:
        return goal
    secrets = str((os.environ if environ is None else environ).get(GOAL_PASSWORD) or "").split()
    if not secrets or len(secrets) not in (1, len(missing)):
        given = f" ({GOAL_PASSWORD} holds {len(secrets)} for {len(missing)} URLs)" if secrets else ""
        raise BadInputError(
            f"The goal of the run --resume continues had a password in {', '.join(missing)}, which is kept in no "
            f"file ({run_file} has the URL without it){given}. Give it again: set {GOAL_PASSWORD}=<password> (for "
            "several URLs, their passwords separated by spaces, in order), or give the goal again with the "
            "password in it, and --resume again."
        )
    for number, url in enumerate(missing):
        goal = goal.replace(url, with_credentials(url, secrets[number if len(secrets) > 1 else 0]))
    return goal


def remember_goal_passwords(goal: str) -> List[str]:
    """Keep the passwords of the URLs in ``goal`` out of what the run writes and shows (the URL shown with
    ``[redacted: password in the goal]`` in their place), though the LLM is sent them: it needs them. Returns those
    URLs without their passwords, for the warning."""
    from aiflows_jarvis.CoreFlowModule import (
        remember_secret,
        url_shown_without_secret,
        urls_with_secrets,
        without_credentials,
    )

    urls = urls_with_secrets(goal)
    for url in urls:
        remember_secret(GOAL_SECRET, url, shown_as=url_shown_without_secret(url, GOAL_SECRET), to_llm=True)
    return [without_credentials(url)[0] for url in urls]


def remember_run_secrets(api_base: Optional[str] = None, environ: Optional[Dict[str, str]] = None) -> None:
    """Have the secrets this process knows redacted from what the run writes and sends (``[redacted: NAME]``): the
    variables the interpreter keeps from the code (API keys included) and the password of ``api_base``."""
    from aiflows_jarvis.CoreFlowModule import remember_secret, remember_secrets, url_password
    from aiflows_jarvis.InterpreterFlowModule.interpreter import secrets_to_redact

    if api_base and url_password(api_base):
        remember_secret("--api-base password", api_base)
    remember_secrets(secrets_to_redact(base=environ))


def litellm_model_name(model: str, backend_used: str, api_base: Optional[str] = None) -> str:
    """``model`` as litellm 1.0.0 accepts it.

    litellm 1.0.0 knows only the models of late 2023 by bare name; any other name must carry its provider:
    ``openai/<name>`` for OpenAI and OpenAI-compatible servers (litellm strips the prefix before sending), and
    ``azure/<deployment>`` for Azure.
    """
    model = model.strip()
    if backend_used == "azure":
        return model if model.startswith("azure/") else f"azure/{model}"
    if model.startswith("openai/"):
        return model
    if api_base:  # an OpenAI-compatible server: its names (e.g. meta-llama/Llama-3-8B) go through as they are
        return f"openai/{model}"
    if "/" not in model:  # litellm's model map, read without importing litellm
        from aiflows_jarvis.CoreFlowModule import litellm_model_cost

        return model if model in litellm_model_cost() else f"openai/{model}"
    from aiflows_jarvis.CoreFlowModule import import_litellm

    litellm = import_litellm()
    provider = model.split("/", 1)[0]
    if provider in set(getattr(litellm, "provider_list", [])) - {"openai", "custom_openai"}:
        # The key Jarvis found is OpenAI's (or Azure's): it must not be sent to another provider.
        raise BadInputError(
            f"--model {model}: the command line talks to OpenAI, Azure OpenAI or an OpenAI-compatible server. For "
            f"{provider}, run an OpenAI-compatible proxy in front of it (e.g. `litellm --model {model}`) and pass "
            "its address with --api-base."
        )
    return f"openai/{model}"


def load_config(path: str) -> Dict[str, Any]:
    """A top-level configuration: ``{flow: {_target_: ..., ...}}`` (as the repository's jarvis.yaml)."""
    from aiflows_jarvis.CoreFlowModule import read_yaml

    if not os.path.isfile(path):
        raise BadInputError(f"No configuration file at {path}.")
    try:
        config = read_yaml(path)
    except Exception as error:  # YAML or interpolation errors
        raise BadInputError(f"{path} is not a valid configuration: {error}") from error
    if not isinstance(config, dict) or not isinstance(config.get("flow"), dict) or "_target_" not in config["flow"]:
        raise BadInputError(f"{path}: the configuration needs a `flow:` section with a `_target_`.")
    return config


def instantiate(config: Dict[str, Any], api_infos: List[Any], memory_dir: str, source: str = "The configuration"):
    """Build the configuration's flow: ``quick_load`` fills every ``api_infos: ???`` with ``api_infos``, and
    ``set_memory_files`` every ``memory_files: ???`` with files in ``memory_dir``. A ``_target_`` that does not build
    a flow is refused first (``check_flow_targets``; ``source`` names the configuration in the message), and a
    ConfigurationError while building (a command without a flow, ...) is bad input too: BadInputError, with
    ``source`` named."""
    check_flow_targets(config, source)
    from aiflows.utils.general_helpers import quick_load

    from aiflows_jarvis.CoreFlowModule import instantiate as build

    config = copy.deepcopy(config)
    quick_load(config, api_infos)
    set_memory_files(config, memory_dir)
    set_bookkeeping(config, source)
    try:
        return build(config["flow"])
    except BadInputError:
        raise
    except ConfigurationError as error:
        raise BadInputError(f"{source}: {error}") from error


def set_bookkeeping(config: Dict[str, Any], source: str = "The configuration") -> None:
    """A top-level ``bookkeeping_by_code: false`` given to every flow of the tree that has the setting (the loops,
    their controllers, the bosses): every command through the LLM, one call per step, as the seed's Jarvis did.
    True (the default) leaves each flow's own setting."""
    value = config.get("bookkeeping_by_code", True)
    if not isinstance(value, bool):
        raise BadInputError(f"{source}: `bookkeeping_by_code` must be true or false, not {value!r}")
    if value:
        return
    from aiflows_jarvis.CoreFlowModule import root_of, walk_config

    for _, node, effective in list(walk_config(root_of(config), create=True)):
        if "bookkeeping_by_code" in effective or "one_step_plan" in effective:
            node["bookkeeping_by_code"] = False


def check_flow_targets(config: Dict[str, Any], source: str = "The configuration") -> None:
    """BadInputError naming the key, the flow and the target when a ``_target_`` in a configuration's flows
    (``flow`` and its ``subflows_config``, at any depth) does not build a flow: hydra would call a function or a
    class that is not a flow, and the run would end in a traceback far from the mistake."""
    from aiflows_jarvis.CoreFlowModule import flow_target_problem, root_of, walk_config

    for path, node, _ in walk_config(root_of(config)):
        target = node.get("_target_")
        if target is None or (isinstance(target, str) and target.startswith(".")):
            continue  # the class default's, or relative to the parent's package (aiflows resolves it when building)
        problem = flow_target_problem(target)
        if problem:
            key = ".".join(["flow"] + [f"subflows_config.{name}" for name in path.split("/")[1:]] + ["_target_"])
            raise BadInputError(
                f"{source}: `{key}` (the flow {path}) {problem}. A flow's `_target_` names the class's "
                "instantiate_from_default_config, e.g. "
                "aiflows_jarvis.JarvisFlowModule.JarvisFlow.instantiate_from_default_config."
            )


def walk(flow: Any, path: str = "") -> Iterator[tuple]:
    path = path or flow.flow_config.get("name", "flow")
    yield path, flow
    for name, sub in getattr(flow, "subflows", {}).items():
        yield from walk(sub, f"{path}/{name}")


def set_editor(flow: Any, command: str) -> int:
    """Make every review step of a flow tree open ``command`` (e.g. ``code --wait``); returns how many."""
    count = 0
    for _, node in walk(flow):
        if "open_editor" in node.flow_config:
            node.flow_config["editor"] = command
            count += 1
    return count


def set_chat_settings(flow: Any, **settings: Any) -> int:
    """Set chat settings (``context_window``, ``structured_output``, ...) on every chat of a flow tree; settings
    that are None are left as configured. Returns how many chats were changed."""
    settings = {key: value for key, value in settings.items() if value is not None}
    count = 0
    for _, node in walk(flow):
        if settings and "structured_output" in node.flow_config:  # the chats (ChatAtomicFlow and its subclasses)
            node.flow_config.update(settings)
            count += 1
    return count


def prestart_interpreters(flow: Any) -> int:
    """Start the Python kernels of a flow tree in the background (each flow's ``prestart``: RunCodeFlow starts its
    interpreter in the folder a run would use); returns how many were started. Returns at once."""
    started: List[str] = []
    for path, node in walk(flow):
        prestart = getattr(node, "prestart", None)
        if callable(prestart) and not any(path.startswith(done + "/") for done in started):
            prestart()
            started.append(path)
    return len(started)


def interpreters(flow: Any) -> Iterator[tuple]:
    """``(path, flow)`` of each interpreter in a flow tree: a flow with a ``workspace`` and a ``close()``."""
    for path, node in walk(flow):
        if callable(getattr(node, "close", None)) and "workspace" in node.flow_config:
            yield path, node


def close_interpreters(flow: Any) -> List[tuple]:
    """Shut down the kernel of every interpreter in a flow tree (with the processes its code started); returns
    ``(pid, command line)`` of the processes started by the code that could not be ended."""
    survivors: List[tuple] = []
    for _, node in interpreters(flow):
        node.close()
        survivors += getattr(node, "survivors", None) or []
    return survivors


class MemoryLayout(dict):
    """``{boss path: memory_files}`` as ``prepare_memory`` set it; ``archive`` is the folder the previous files were
    moved to (None when there was nothing to move), ``moved`` their paths before the move."""

    archive: Optional[str] = None
    moved: List[tuple]

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.moved = []  # (path, what it is: plans, logs, report, code library)

    def archived(self) -> str:
        """What was moved to the archive, as the user names it, with its verb: ``plans, logs and report are``,
        ``report is``."""
        order = ["plans", "logs", "report", "code library"]
        kinds = sorted({kind for _, kind in self.moved}, key=order.index)
        words = kinds[0] if len(kinds) == 1 else ", ".join(kinds[:-1]) + " and " + kinds[-1]
        return f"{words} {'is' if kinds in (['report'], ['code library']) else 'are'}"


def prepare_memory(
    flow: Any,
    memory_dir: str,
    resume: bool,
    archive_library: bool = False,
    workdir: Optional[str] = None,
    with_files: tuple = (),
) -> MemoryLayout:
    """Give each boss its memory files in ``memory_dir``; a new run archives the previous plans and logs.

    Nothing is deleted: the previous plans, logs and task records are moved to ``<memory_dir>/archive/<time>-<n>/``.
    The code library is kept (it is what Jarvis has learned) unless ``archive_library`` (a demo replays from an empty
    one). With ``resume`` everything is kept and the bosses continue their interrupted tasks. A plan or log that is
    a symbolic link is archived, never followed, so the new run writes files of its own. Temporary files of writes
    killed earlier are removed. Code runs in ``workdir`` (default: ``memory_dir``), with the library importable.
    ``with_files``: names of other files in ``memory_dir`` that belong to the previous run (its report and step
    record), archived with its plans and logs.
    """
    from aiflows_jarvis.AbstractBossFlowModule.AbstractBossFlow import task_record_path

    layout = MemoryLayout(set_memory_files(flow, memory_dir, workdir or memory_dir))
    sweep_temporary_files(memory_dir)
    if resume:
        flow.flow_config["resume"] = True
        return layout
    stamp, number = time.strftime("%Y%m%d-%H%M%S"), 1
    while os.path.exists(os.path.join(memory_dir, "archive", f"{stamp}-{number}")):
        number += 1
    archive = os.path.join(memory_dir, "archive", f"{stamp}-{number}")
    kinds = {"plan": "plans", "logs": "logs", **({"code_library": "code library"} if archive_library else {})}
    paths = {path: kinds[key] for files in layout.values() for key, path in files.items() if key in kinds}
    if archive_library:
        paths.update({package_dir(p): "code library" for p, kind in list(paths.items()) if p.endswith(".py")})
    # A boss's task record goes with its log: a new run has no interrupted task for a boss to resume.
    paths.update({task_record_path(files["logs"]): "logs" for files in layout.values() if "logs" in files})
    paths.update(
        {
            os.path.join(memory_dir, name): "report"
            for name in with_files
            if os.path.isfile(os.path.join(memory_dir, name))
        }
    )
    for path, kind in sorted(paths.items()):
        if os.path.islink(path) or (os.path.exists(path) and os.path.getsize(path) > 0):
            os.makedirs(archive, exist_ok=True)
            shutil.move(path, os.path.join(archive, os.path.basename(path)))
            layout.archive = archive
            layout.moved.append((path, kind))
    return layout


def check_text(what: str, text: Any) -> Optional[str]:
    """Why ``text`` (``what`` names it for the user: "The goal", "--model") cannot go into a prompt or a request, or
    None. Bytes that are not UTF-8, on a command line or in a file, reach Python as lone surrogates ('\\udcff' for
    the byte 0xff), which no request can carry: the run would fail at its first LLM call."""
    if not isinstance(text, str):
        return f"{what} is not text (it is {type(text).__name__} {shorten(repr(text), 80)})."
    try:
        text.encode("utf-8")
        return None
    except UnicodeEncodeError as error:
        shown = "".join(
            f"\\x{ord(c) - 0xDC00:02x}"
            if "\udc80" <= c <= "\udcff"
            else f"\\u{ord(c):04x}"
            if "\ud800" <= c <= "\udfff"
            else c
            for c in text[:200]
        )
        return (
            f'{what} is not valid UTF-8 text: "{shorten(shown, 120)}" has bytes that are not UTF-8 from '
            f"character {error.start + 1} on. The terminal, script or file it came from uses another encoding "
            "(`locale` shows the terminal's): give it again as UTF-8 text."
        )


def check_run_paths(memory_dir: str, trace: Optional[str] = None, trace_option: str = "--trace") -> Optional[str]:
    """Why a run could not keep its files where it is told to, or None. Checked before anything is moved: a memory
    folder that is a file or cannot be written, or whose path is not UTF-8 text (it goes into prompts), a ``trace``
    file that cannot be written, or that is a symbolic link inside the memory folder (a folder from elsewhere must
    not make Jarvis append to another file). ``trace_option`` is where the trace file was given (--trace or the
    JARVIS_TRACE variable), for the message."""
    memory_dir = os.path.abspath(memory_dir)
    problem = check_text(f"The memory folder's path ({memory_dir!r})", memory_dir)
    if problem:
        return f"{problem} Give another folder with --memory-dir."
    existing = memory_dir
    while not os.path.lexists(existing):  # the nearest part of the path that exists: the folder is made there
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        kind = "a file, not a folder" if os.path.isfile(existing) else "not a folder"  # e.g. a link to nothing
        what = f"is {kind}" if existing == memory_dir else f"cannot be made: {existing} is {kind}"
        return f"The memory folder {memory_dir} {what}. Give another folder with --memory-dir, or move the file away."
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "is read-only" if existing == memory_dir else f"cannot be made in {existing}, which is read-only"
        return (
            f"The memory folder {memory_dir} {what}: the run keeps its memory there. Give a "
            "folder you can write to with --memory-dir."
        )
    return output_file_problem(trace, trace_option, memory_dir, "trace.jsonl") if trace else None


def output_file_problem(path: str, option: str, memory_dir: str, example: str) -> Optional[str]:
    """Why a file a run writes besides its memory (``--trace``, ``--report``, given as ``option``) could not be
    written, or None: it is a folder (``example`` names a file in it), a part of its path is not a folder, or it is a
    symbolic link inside the memory folder."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        return f"{option} {path} is a folder; give a file name, e.g. {os.path.join(path, example)}."
    existing = os.path.dirname(path)
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        return f"{option} {path} cannot be written: {existing} is not a folder."
    folder, memory = os.path.realpath(os.path.dirname(path)), os.path.realpath(os.path.abspath(memory_dir))
    inside = folder == memory or folder.startswith(memory + os.sep)
    if inside and os.path.islink(path):
        return (
            f"{option} {path} is a symbolic link in the memory folder; a run does not follow links there. "
            "Remove it, or give another file."
        )
    return None


FIGURE_SUFFIXES = (".png", ".svg", ".jpg", ".jpeg", ".gif", ".pdf", ".html")
# What a folder scan skips: the memory folder's own bookkeeping, version control, environments and caches.
_SKIPPED_FOLDERS = {"archive", "code_runs", "__pycache__", "node_modules", "venv", ".venv"}
_SCAN_DEPTH, _SCAN_ENTRIES = 3, 5000  # a working folder can be a home folder: the scan is bounded


def new_files(folder: str, since: float, suffixes: Optional[tuple] = FIGURE_SUFFIXES, skip: tuple = ()) -> List[str]:
    """Files made or changed in ``folder`` since ``since`` (by modification time), to show the user what a run made:
    with ``suffixes``, only those (figures and pages); ``None``: every file. Hidden files and folders, ``archive/``,
    ``code_runs/``, environments, caches and the paths in ``skip`` (e.g. the memory folder) are left out, and so is
    what cannot be looked at. The scan is bounded (``_SCAN_DEPTH``, ``_SCAN_ENTRIES``): the folder may be a home."""
    found, seen = [], 0
    skipped = {os.path.abspath(p) for p in skip}
    top = os.path.abspath(folder)
    for root, dirs, names in os.walk(top):
        depth = 0 if root == top else os.path.relpath(root, top).count(os.sep) + 1
        dirs[:] = (
            [
                d
                for d in dirs
                if d not in _SKIPPED_FOLDERS and not d.startswith(".") and os.path.join(root, d) not in skipped
            ]
            if depth < _SCAN_DEPTH
            else []
        )
        for name in names:
            seen += 1
            if seen > _SCAN_ENTRIES:
                return sorted(found)
            path = os.path.join(root, name)
            if name.startswith(".") or path in skipped or (suffixes and not name.lower().endswith(suffixes)):
                continue
            try:
                made = os.path.getmtime(path) >= since
            except OSError:
                continue
            if made:
                found.append(path)
    return sorted(found)
