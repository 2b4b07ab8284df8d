from __future__ import annotations

from flow_modules.aiflows.AbstractBossFlowModule import AbstractBossFlow


class ExtendLibraryFlow(AbstractBossFlow):
    """A boss that extends the code library: plans the functions to write, then writes, tests and saves each one.

    Configured over AbstractBossFlow (no logic of its own). Its controller's commands: `write_code` (a
    CodeWriterFlow: write and test one function with the user), `save_code` (a SaveCodeAtomicFlow: append it to
    `library.py`), `ask_user`, `re_plan`, `update_plan`, `finish`. Its memory: `plan`, `logs` and `code_library`
    (signatures and docstrings). When it finishes it is fully reset (its chats are dropped; plan, logs and library
    stay in files).

    *Configuration Parameters*:
    - `memory_files` (dict): `plan`, `logs`, `code_library` (e.g. plan_extlib.txt, logs_extlib.txt, library.py).
    - `memory_file_names` (dict): the file names `set_memory_files` uses in a memory folder.
    - `subflows_config`: `MemoryReading`, `Planner`, `CtrlExMem` (see AbstractBossFlow).

    *Input Interface*:
    - `goal` (str): the functions to add to the library.

    *Output Interface*:
    - `summary` (str), `result` (str), `status` (str): see AbstractBossFlow.
    """
