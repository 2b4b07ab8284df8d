from __future__ import annotations

from typing import Any, Dict

from aiflows_jarvis.CoreFlowModule import LeanAtomicFlow, append_log_entry, memory_path


class MemoryWritingAtomicFlow(LeanAtomicFlow):
    """Appends one readable entry per executed command to the `logs` memory file.

    An entry is a header line (number, time, command), the arguments (each shortened) and the result (shortened,
    head and tail kept). Entries are appended with a single write; earlier entries are never rewritten.

    *Configuration Parameters*:
    - `log_key` (str): the memory name of the log file in `memory_files` (default `logs`).
    - `result_limit` (int): characters of the result kept in the entry.

    *Input Interface*:
    - `memory_files` (dict), `command` (str), `command_args` (dict), `result` (str).

    *Output Interface*:
    - `log_entries` (int): the number of entries in the log after this one.
    """

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        number = append_log_entry(
            memory_path(self, input_data, self.flow_config.get("log_key", "logs")),
            str(input_data.get("command", "")),
            input_data.get("command_args") or {},
            input_data.get("result", ""),
            result_limit=int(self.flow_config.get("result_limit", 1500)),
        )
        return {"log_entries": number}
