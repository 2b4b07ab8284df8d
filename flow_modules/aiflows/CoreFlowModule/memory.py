"""Memory files: plans, logs and the code library, read and written in one place.

* Plans and the library are replaced atomically (a temporary file in the same folder, then a rename), so a crash never
  leaves half a file and never loses what was there.
* Logs only grow: one entry per executed command, appended with a single write; earlier entries are never rewritten.
  Reading the logs for a prompt reads only the last entries (from the end of the file), so the cost of a round does
  not grow with the length of the log.
"""
from __future__ import annotations

import ast
import json
import os
import re
import time
from typing import Any, Dict, List, Optional, Tuple

from .errors import ConfigurationError, MemoryFileError

_LOG_HEADER = re.compile(r"^--- \[(\d+)\] [^\n]* ---$", re.M)


def read_text(path: str) -> str:
    """The file's text, or '' if it does not exist."""
    try:
        with open(path, "r", encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as error:
        raise MemoryFileError(f"Cannot read memory file {path}: {error}") from error


def _create_exclusive(prefix: str, suffix: str) -> Tuple[int, str]:
    """A new file ``<prefix><random><suffix>`` opened for writing, mode 0666 minus the umask."""
    while True:
        path = f"{prefix}{os.urandom(6).hex()}{suffix}"
        try:
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), path
        except FileExistsError:
            continue


def atomic_write(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` atomically (temporary file in the same folder, fsync, rename)."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
        # Created 0666 minus the umask, as any new file of the user's (mkstemp would make it 0600).
        fd, tmp = _create_exclusive(os.path.join(folder, f".{os.path.basename(path)}."), ".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            if os.path.exists(path):  # a file replaced keeps its mode
                os.chmod(tmp, os.stat(path).st_mode & 0o777)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    except OSError as error:
        raise MemoryFileError(f"Cannot write memory file {path}: {error}") from error


def append_text(path: str, text: str) -> None:
    """Append ``text`` with one write on an O_APPEND descriptor: what was in the file is never touched."""
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        data = text.encode("utf-8")
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            while data:
                written = os.write(fd, data)
                data = data[written:]
        finally:
            os.close(fd)
    except OSError as error:
        raise MemoryFileError(f"Cannot append to memory file {path}: {error}") from error


def archive_copy(path: str, text: str) -> str:
    """Keep ``text`` (what ``path`` held) in ``<folder of path>/archive/<name>-<time>-<n>``; returns the copy's path."""
    folder = os.path.join(os.path.dirname(os.path.abspath(path)), "archive")
    os.makedirs(folder, exist_ok=True)
    stem, suffix = os.path.splitext(os.path.basename(path))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    number = 1
    while os.path.exists(os.path.join(folder, f"{stem}-{stamp}-{number}{suffix}")):
        number += 1
    copy_path = os.path.join(folder, f"{stem}-{stamp}-{number}{suffix}")
    atomic_write(copy_path, text)
    return copy_path


# ~~~ Logs ~~~
def shorten(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, keeping head and tail, saying how much was cut."""
    text = str(text)
    if limit <= 0 or len(text) <= limit:
        return text
    head = int(limit * 0.7)
    tail = max(0, limit - head)
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[len(text) - tail:] if tail else ''}"


def summarize_arguments(command_args: Optional[Dict[str, Any]], limit_per_value: int = 300) -> str:
    if not command_args:
        return "(none)"
    parts = []
    for name, value in command_args.items():
        rendered = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        parts.append(f"{name} = {shorten(rendered, limit_per_value)!r}" if isinstance(value, str)
                     else f"{name} = {shorten(rendered, limit_per_value)}")
    return "; ".join(parts)


def format_log_entry(number: int, command: str, command_args: Optional[Dict[str, Any]], result: Any,
                     result_limit: int = 1500, when: Optional[float] = None) -> str:
    """One readable log entry: a header line, the arguments, the result (both shortened)."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when if when is not None else time.time()))
    result_text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
    result_text = shorten(result_text.strip(), result_limit).replace("\n", "\n    ")
    return (
        f"--- [{number}] {stamp} {command} ---\n"
        f"arguments: {summarize_arguments(command_args)}\n"
        f"result: {result_text}\n"
    )


def _read_tail(path: str, min_headers: int, block: int = 1 << 13) -> Tuple[str, bool]:
    """The end of the file, at least ``min_headers`` entry headers long (or the whole file); and whether it is whole."""
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        return "", True
    with open(path, "rb") as f:
        start = size
        chunk = b""
        while start > 0:
            start = max(0, start - block)
            f.seek(start)
            chunk = f.read(size - start)
            if chunk.count(b"\n--- [") + chunk.startswith(b"--- [") >= min_headers:
                break
    return chunk.decode("utf-8", errors="replace"), start == 0


def split_log_entries(text: str) -> List[Tuple[int, str]]:
    """``[(number, entry text)]`` for the complete entries in ``text``."""
    headers = list(_LOG_HEADER.finditer(text))
    entries = []
    for i, match in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
        entries.append((int(match.group(1)), text[match.start():end].rstrip("\n")))
    return entries


def last_log_number(path: str) -> int:
    text, _ = _read_tail(path, 1)
    entries = split_log_entries(text)
    return entries[-1][0] if entries else 0


def append_log_entry(path: str, command: str, command_args: Optional[Dict[str, Any]], result: Any,
                     result_limit: int = 1500) -> int:
    """Append one entry to the log file ``path``; returns its number."""
    number = last_log_number(path) + 1
    append_text(path, format_log_entry(number, command, command_args, result, result_limit) + "\n")
    return number


def read_log_tail(path: str, max_entries: Optional[int], max_chars: Optional[int] = None) -> str:
    """The last entries of a log: at most ``max_entries`` (all if None) and at most ``max_chars`` characters (but at
    least one entry), with a line saying how many earlier ones are left out."""
    if not max_entries or max_entries <= 0:
        if not max_chars:
            return read_text(path).rstrip("\n")
        max_entries = 10 ** 9
    text, whole = _read_tail(path, min(max_entries, 10 ** 6) + 1)
    entries = split_log_entries(text)
    if not entries:
        return text.strip() if whole else ""
    shown = entries[-max_entries:]
    if max_chars:
        total, keep = 0, 0
        for _, entry in reversed(shown):
            total += len(entry) + 1
            if keep and total > max_chars:
                break
            keep += 1
        shown = shown[-keep:]
    first_shown = shown[0][0]
    body = "\n".join(entry for _, entry in shown)
    if first_shown > 1:
        return f"[{first_shown - 1} earlier entries are in {os.path.basename(path)}; the last {len(shown)} follow]\n{body}"
    return body


# ~~~ Code library ~~~
def _signature(node: ast.AST) -> str:
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    return f"{prefix} {node.name}({ast.unparse(node.args)}){returns}:"


def _docstring_block(node: ast.AST, indent: str) -> List[str]:
    doc = ast.get_docstring(node)
    if not doc:
        return [f'{indent}"""(no docstring)"""']
    lines = doc.split("\n")
    if len(lines) == 1:
        return [f'{indent}"""{lines[0]}"""']
    return [f'{indent}"""{lines[0]}'] + [f"{indent}{line}" if line else "" for line in lines[1:]] + [f'{indent}"""']


def library_summary(source: str, max_chars: Optional[int] = None) -> str:
    """The signatures and docstrings of the top-level functions and classes of a Python file, without their bodies.

    Beyond ``max_chars`` the docstrings are cut to their first line, then only the signatures are given, and at the
    last the names (a line says so): the summary goes into prompts and must not outgrow them.
    """
    if not source.strip():
        return ""
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        return f"(the code library does not parse: line {error.lineno}: {error.msg})"
    full = _library_blocks(tree, "full")
    if not max_chars or len(full) <= max_chars:
        return full
    for detail in ("first_line", "signatures"):
        shorter = _library_blocks(tree, detail)
        if len(shorter) <= max_chars:
            return f"(the library is large: {'first docstring lines' if detail == 'first_line' else 'signatures'} " \
                   f"only)\n{shorter}"
    names = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return shorten(f"(the library is large: names only) {', '.join(names)}", max_chars)


def _library_blocks(tree: ast.Module, detail: str) -> str:
    def doc(node, indent):
        if detail == "signatures":
            return []
        block = _docstring_block(node, indent)
        if detail == "first_line":
            first = (ast.get_docstring(node) or "(no docstring)").strip().split("\n")[0]
            return [f'{indent}"""{first}"""']
        return block

    blocks = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            blocks.append("\n".join([_signature(node)] + doc(node, "    ")))
        elif isinstance(node, ast.ClassDef):
            bases = ", ".join(ast.unparse(b) for b in node.bases)
            lines = [f"class {node.name}({bases}):" if bases else f"class {node.name}:"]
            lines += doc(node, "    ")
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                        not item.name.startswith("_") or item.name == "__init__"):
                    lines.append("    " + _signature(item))
                    lines += doc(item, "        ")
            blocks.append("\n".join(lines))
    return ("\n\n" if detail == "full" else "\n").join(blocks)


def split_future_imports(source: str) -> Tuple[List[str], str]:
    """The ``from __future__ import ...`` lines of some code, and the code without them (such imports must come
    first in a file, so code appended to a library, or run after other statements, has to move them up)."""
    tree = ast.parse(source)
    lines = source.split("\n")
    futures: List[str] = []
    for node in reversed(tree.body):
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            futures.insert(0, "\n".join(lines[node.lineno - 1:node.end_lineno]).strip())
            del lines[node.lineno - 1:node.end_lineno]
    return futures, "\n".join(lines).strip("\n")


def defined_names(source: str) -> List[str]:
    """Names of the top-level functions and classes defined in ``source`` (SyntaxError propagates)."""
    tree = ast.parse(source)
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


# ~~~ Which file holds a memory ~~~
def memory_files_of(flow: Any, input_data: Dict[str, Any]) -> Dict[str, str]:
    """`memory_files` from a flow's input, else from its config; a clear error if neither is set."""
    memory_files = input_data.get("memory_files") or flow.flow_config.get("memory_files")
    if not isinstance(memory_files, dict) or not memory_files or memory_files == "???":
        raise ConfigurationError(
            f"{flow.flow_config['name']}: `memory_files` is not set; it must map memory names to file paths, "
            "e.g. {plan: memory/plan.txt, logs: memory/logs.txt}"
        )
    return memory_files


def memory_path(flow: Any, input_data: Dict[str, Any], key: str) -> str:
    """The file of memory ``key`` for a flow (see ``memory_files_of``); a clear error if it is not configured."""
    memory_files = memory_files_of(flow, input_data)
    if key not in memory_files:
        raise ConfigurationError(
            f"{flow.flow_config['name']}: memory_files has no '{key}' (it has {sorted(memory_files)})"
        )
    return memory_files[key]


def with_memory_files(flow: Any, input_data: Dict[str, Any]) -> Dict[str, Any]:
    """``input_data`` with the flow's configured ``memory_files`` added when the input has none."""
    if not input_data.get("memory_files") and isinstance(flow.flow_config.get("memory_files"), dict):
        return {**input_data, "memory_files": flow.flow_config["memory_files"]}
    return input_data


def set_memory_files(flow: Any, memory_dir: str) -> Dict[str, Dict[str, str]]:
    """Give every flow of a tree that declares ``memory_file_names`` its ``memory_files`` in ``memory_dir``.

    One call configures a whole hierarchy (Jarvis -> Coder -> ExtendLibrary, ...): each boss names its own files
    (``plan_coder.txt``, ...) in its YAML, and code runners without a ``workspace`` get ``memory_dir``. ``flow`` is a
    flow, or a configuration dict (``{_target_: ..., subflows_config: ...}``) before it is instantiated: there every
    ``memory_files: ???`` is filled (hydra refuses to build a config that still has one). Returns
    ``{path: memory_files}`` for what was set.
    """
    memory_dir = os.path.abspath(memory_dir)
    os.makedirs(memory_dir, exist_ok=True)
    if isinstance(flow, dict):
        return _set_memory_files_in_config(flow, memory_dir)
    done: Dict[str, Dict[str, str]] = {}

    def visit(node: Any, path: str) -> None:
        config = node.flow_config
        names = config.get("memory_file_names")
        if isinstance(names, dict) and names:
            config["memory_files"] = {key: os.path.join(memory_dir, name) for key, name in names.items()}
            done[path] = config["memory_files"]
        if "workspace" in config and not config["workspace"]:
            config["workspace"] = memory_dir
        for name, sub in getattr(node, "subflows", {}).items():
            visit(sub, f"{path}/{name}")

    visit(flow, flow.flow_config.get("name", "flow"))
    return done


def _set_memory_files_in_config(config: Dict[str, Any], memory_dir: str) -> Dict[str, Dict[str, str]]:
    """Fill every ``memory_files: ???`` of a configuration from the ``memory_file_names`` its flows declare."""
    from .config_tree import fill

    def files_for(node: Dict[str, Any], effective: Dict[str, Any]):
        names = node.get("memory_file_names") or effective.get("memory_file_names")
        if node.get("memory_files", effective.get("memory_files")) == "???" and isinstance(names, dict):
            return {"memory_files": {key: os.path.join(memory_dir, name) for key, name in names.items()}}
        return None

    return {path: updates["memory_files"] for path, updates in fill(config, files_for).items()}
