from __future__ import annotations

from typing import Any, Dict

from aiflows_jarvis.CoreFlowModule import ConfigurationError, LeanAtomicFlow, MemoryFileError
from aiflows_jarvis.CoreFlowModule.library_package import package_summary
from aiflows_jarvis.CoreFlowModule.memory import memory_path, read_log_tail, read_text

READERS = ("text", "log_tail", "signatures")


class MemoryReadingAtomicFlow(LeanAtomicFlow):
    """Reads the memory files named in `memory_files` for the keys of its output interface.

    `plan` and other memories are read whole. `logs` is read from its end: the last `max_log_entries` entries, with
    a line saying how many earlier ones are in the file, so what goes into a prompt does not grow with the run.
    `code_library` is read as the library package's structure (its modules, one line each) and the signatures and
    docstrings of its functions and classes, not their bodies, from the package's index (a `library.py` is migrated
    into the package first). A missing file reads as "".

    *Configuration Parameters*:
    - `output_interface` (list): the memories to read, e.g. `[plan, logs, code_library]`.
    - `readers` (dict): how each memory is read: `text`, `log_tail` or `signatures` (defaults: `logs: log_tail`,
      `code_library: signatures`, others `text`).
    - `max_log_entries` (int or null): how many log entries to read at most (null: all).
    - `max_log_chars` (int or null): how many characters of log entries to read at most (at least one entry).
    - `max_library_chars` (int or null): the size of the library summary; beyond it docstrings are shortened,
      then dropped.
    - `memory_files` (dict, optional): used when the input has no `memory_files`.

    *Input Interface*:
    - `memory_files` (dict): memory name -> file path.

    *Output Interface*:
    - one key per memory in `output_interface` (str).
    """

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        readers = {"logs": "log_tail", "code_library": "signatures", **(self.flow_config.get("readers") or {})}
        out = {}
        for key in self.flow_config["output_interface"]:
            reader = readers.get(key, "text")
            path = memory_path(self, input_data, key)
            if reader == "log_tail":
                out[key] = read_log_tail(path, self.flow_config.get("max_log_entries"),
                                         self.flow_config.get("max_log_chars"))
            elif reader == "signatures":
                try:
                    out[key] = package_summary(path, self.flow_config.get("max_library_chars"))
                except MemoryFileError as error:  # a library.py that does not compile is not migrated
                    out[key] = f"(the code library cannot be read: {error})"
            elif reader == "text":
                out[key] = read_text(path).strip()
            else:
                raise ConfigurationError(f"{self.flow_config['name']}: unknown reader {reader!r}; use one of {READERS}")
        return out
