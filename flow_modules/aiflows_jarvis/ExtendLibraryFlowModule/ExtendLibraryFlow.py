from __future__ import annotations

import re
from typing import Any, Dict, List

from aiflows_jarvis.AbstractBossFlowModule import AbstractBossFlow
from aiflows_jarvis.CodeLibraryFlowModule import ensure_library, library_digests
from aiflows_jarvis.CoreFlowModule import MemoryFileError, atomic_write, get_console, read_text
from aiflows_jarvis.UpdatePlanFlowModule.UpdatePlanAtomicFlow import (
    describe_update,
    mark_steps_done,
    plan_steps,
)

_NAME = re.compile(r"[A-Za-z_]\w*")
# What names a function in a step: `code` in backticks, or a name followed by "(".
_NAMES_CODE = re.compile(r"`[^`]+`|[A-Za-z_]\w*\s*\(")


def steps_done_by_saving(plan: str, saved: List[str]) -> List[str]:
    """The numbers of the steps of an ExtendLibrary plan whose work is done once the functions ``saved`` are in the
    library: a step naming one of them, and a step naming no code that only saves what the step before it wrote
    ("2. Save it to the code library.")."""
    numbers, previous_saved = [], False
    for number, text in plan_steps(plan):
        names_saved = bool(set(_NAME.findall(text)) & set(saved))
        saves_previous = previous_saved and not _NAMES_CODE.search(text) and "save" in text.lower()
        if names_saved or saves_previous:
            numbers.append(number)
        previous_saved = names_saved or saves_previous
    return numbers


class ExtendLibraryFlow(AbstractBossFlow):
    """A boss that extends the code library: plans the functions to write, then writes, tests and saves each one.

    Configured over AbstractBossFlow: its own commands (`subflows_config.CtrlExMem.commands` in
    ExtendLibraryFlow.yaml, with those of every boss from CtrlExMemFlow.yaml) write and test one function with the
    user (a CodeWriterFlow) and save it into a module of the `library` package (a SaveCodeAtomicFlow). Its memory:
    `plan`, `logs` and `code_library` (the library's modules, signatures and docstrings).

    On a resume the library is the truth about what was saved: the plan steps of functions saved since the task
    started (its task record holds digests of the definitions) are marked "[done]", so that a function saved just
    before the run stopped is not written again; the `resume` entry says which, and that unsaved code is gone.

    *Configuration Parameters*:
    - `memory_files` (dict): `plan`, `logs`, `code_library` (e.g. plan_extlib.txt, logs_extlib.txt, library:
      the package folder; a `library.py` there is migrated into it).
    - `memory_file_names` (dict): the file names `set_memory_files` uses in a memory folder.
    - `resume_note` (str): see AbstractBossFlow.
    - `subflows_config`: `MemoryReading`, `Planner`, `CtrlExMem` (see AbstractBossFlow).

    *Input Interface*:
    - `goal` (str): the functions to add to the library.

    *Output Interface*:
    - `summary` (str), `result` (str), `status` (str): see AbstractBossFlow.
    """

    def task_record(self, memory_files: Dict[str, str]) -> Dict[str, Any]:
        return {"library": self._library_digests(memory_files)}

    def on_resume(self, memory_files: Dict[str, str], record: Dict[str, Any]) -> str:
        before = record.get("library")
        now = self._library_digests(memory_files)
        if not isinstance(before, dict) or now is None:
            return ""
        saved = [name for name, digest in now.items() if before.get(name) != digest]
        if not saved:
            return ""
        plan_path = memory_files["plan"]
        plan = read_text(plan_path)
        marked = mark_steps_done(plan, steps_done_by_saving(plan, saved))
        saved_note = (
            f"{', '.join(saved)} {'was' if len(saved) == 1 else 'were'} saved into the library before the run stopped"
        )
        if marked == plan:
            return f"{saved_note}; the plan has no step naming {'it' if len(saved) == 1 else 'them'} left to mark done."
        atomic_write(plan_path, marked)
        get_console().show(
            "plan", f"{self.flow_config['name']}: the plan, with the saved functions marked done:", marked
        )
        return f"{saved_note}. {describe_update(plan, marked)}"

    @staticmethod
    def _library_digests(memory_files: Dict[str, str]):
        """Digests of the library's definitions (from its index), or None when there is no library or it cannot be
        read (a `library.py` that does not compile)."""
        path = memory_files.get("code_library")
        if not path:
            return None
        try:
            return library_digests(ensure_library(path))
        except MemoryFileError:
            return None
