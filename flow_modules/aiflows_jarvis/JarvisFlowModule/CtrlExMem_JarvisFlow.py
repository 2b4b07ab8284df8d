from __future__ import annotations

from aiflows_jarvis.AbstractBossFlowModule import CtrlExMemFlow


class CtrlExMem_JarvisFlow(CtrlExMemFlow):
    """Carries out Jarvis's plan: a CtrlExMemFlow with Jarvis's controller and executors.

    The controller's chat is appended to and rebuilt once per block of calls; the logs are appended to and read again
    after every command, and a step it sees done is marked with `update_plan`, so the next message tells the
    controller what changed in its memory. Its `commands` (CtrlExMem_JarvisFlow.yaml) declare Jarvis's own
    commands with their flows, merged over those of every boss (CtrlExMemFlow.yaml); the last `final_answer` is
    kept as `answer`.

    *Input Interface*: `goal`, `memory_files`, `plan`, `logs`.

    *Output Interface*: `summary`, `result`, `status`, `answer`.
    """
