from __future__ import annotations

from aiflows_jarvis.AbstractBossFlowModule import AbstractBossFlow


class CoderFlow(AbstractBossFlow):
    """A boss that reaches a goal with code: it extends the code library with reusable functions and runs code.

    Configured over AbstractBossFlow (no logic of its own): its own commands (`subflows_config.CtrlExMem.commands`
    in CoderFlow.yaml, with those of every boss from CtrlExMemFlow.yaml) extend the library through an
    ExtendLibraryFlow and run Python in a persistent kernel, or shell code, with the user in the loop. Its memory:
    `plan`, `logs` and `code_library` (signatures and docstrings). The interpreter's session outlives a task; after a
    resume it is new, and the `resume` entry of Coder's log says so (its variables are gone).

    *Configuration Parameters*:
    - `memory_files` (dict): `plan`, `logs`, `code_library` (e.g. plan_coder.txt, logs_coder.txt, library.py).
    - `memory_file_names` (dict): the file names `set_memory_files` uses in a memory folder.
    - `subflows_config`: `MemoryReading`, `Planner`, `CtrlExMem` (see AbstractBossFlow).

    *Input Interface*:
    - `goal` (str): what to achieve with code.

    *Output Interface*:
    - `summary` (str), `result` (str), `status` (str): see AbstractBossFlow.
    """
