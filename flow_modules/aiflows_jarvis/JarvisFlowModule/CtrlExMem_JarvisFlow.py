from __future__ import annotations

from aiflows_jarvis.AbstractBossFlowModule import CtrlExMemFlow


class CtrlExMem_JarvisFlow(CtrlExMemFlow):
    """Carries out Jarvis's plan: a CtrlExMemFlow with Jarvis's controller and executors.

    Take notice that:
    1. The controller keeps only its last messages (the refreshed system prompt, its last command, the new result).
    2. After every command the logs file of Jarvis is appended to and read again, so the next system prompt has it.
    3. When the controller sees that a step is done it calls `update_plan`, and the next system prompt has the plan
       with that step marked done.
    Its `commands` declare each command once, with the flow that runs it: `Coder`, `ask_user`, `re_plan`,
    `update_plan`, `intermediate_answer`, `final_answer` (and `finish`, run by the loop); the answer of the last
    `final_answer` is kept as `answer`.

    *Input Interface*: `goal`, `memory_files`, `plan`, `logs`.

    *Output Interface*: `summary`, `result`, `status`, `answer`.
    """
