from __future__ import annotations

from typing import Any, Dict

from aiflows_jarvis.CoreFlowModule import ConfigurationError, LeanAtomicFlow, MemoryFileError, get_console, memory_path

from .retrieval import search_text
from .search_index import library_index, log_index

_WHAT = {"code_library": "code library", "logs": "logs"}


class MemorySearchAtomicFlow(LeanAtomicFlow):
    """Answers the controller's `search_library(query)` / `search_logs(query)`: the entries of a memory most relevant
    to a query, from the same index the prompts' entries are chosen from.

    A prompt shows only part of a large library or a long log, and says so; this is how the controller sees the
    rest. The answer is the command's result, so it is in the logs and the run's report like any other.

    *Configuration Parameters*:
    - `memory` (str): `code_library` or `logs` (the key of `memory_files` searched).
    - `max_results` (int): how many entries at most.
    - `max_chars` (int): the answer's size at most (the entries share it).

    *Input Interface*:
    - `query` (str): a few words of what is looked for.
    - `memory_files` (dict): memory name -> file path.

    *Output Interface*:
    - `result` (str): the entries found, best first, or that none matched.
    """

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        memory = self.flow_config.get("memory")
        if memory not in _WHAT:
            raise ConfigurationError(
                f"{self.flow_config['name']}: `memory` must be one of {sorted(_WHAT)}, not {memory!r}"
            )
        query = str(input_data.get("query") or "").strip()
        if not query:
            return {"result": "Nothing was searched: the query is empty. Give a few words of what you look for."}
        path = memory_path(self, input_data, memory)
        try:
            index = library_index(path) if memory == "code_library" else log_index(path)
        except MemoryFileError as error:  # a library.py that does not compile is not migrated
            return {"result": f"Nothing was searched: the {_WHAT[memory]} cannot be read: {error}"}
        result = search_text(
            index,
            query,
            _WHAT[memory],
            int(self.flow_config.get("max_results", 8)),
            int(self.flow_config.get("max_chars", 4000)),
        )
        get_console().line("result", result.split("\n", 1)[0])
        return {"result": result}
