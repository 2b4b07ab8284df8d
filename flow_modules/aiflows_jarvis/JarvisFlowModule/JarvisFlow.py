from __future__ import annotations

from aiflows_jarvis.AbstractBossFlowModule import AbstractBossFlow


class JarvisFlow(AbstractBossFlow):
    """Jarvis: a general-purpose agent that reaches a goal given in natural language by planning, writing and
    running code.

    JarvisFlow is a boss (AbstractBossFlow: MemoryReading -> Planner -> CtrlExMem), configured, with no logic of
    its own. Its planner writes a plan with the user; its controller then calls the commands of its loop
    (CtrlExMem_JarvisFlow) one at a time, until the user accepts its final answer: a step that takes code goes to
    Coder (a CoderFlow, itself a boss that extends the code library through ExtendLibrary and runs code in a
    stateful interpreter). Its memory is `plan` and `logs`, given to its controller in messages: a snapshot, then
    what changed after each round; the chat is rebuilt once per block of calls.

    *Configuration Parameters*:
    - `memory_files` (dict): mem_name -> file path for `plan` and `logs` (plan_jarvis.txt, logs_jarvis.txt); set it
      in the YAML, when instantiating, or with `set_memory_files(flow, memory_dir)` (every boss below gets its
      own files, named in its `memory_file_names`).
    - `resume` (bool): continue from the plan file instead of writing a new plan.
    - `subflows_config`:
      - `MemoryReading`: reads `plan` and `logs`.
      - `Planner`: a Planner_JarvisFlow (writes Jarvis's plan with the user).
      - `CtrlExMem`: a CtrlExMem_JarvisFlow (carries the plan out).

    *Input Interface*:
    - `goal` (str): the user's goal.

    *Output Interface*:
    - `summary` (str): the controller's summary when it finished (or why Jarvis stopped).
    - `result` (str): the result of the last command that did work.
    - `status` (str): `finished`, or `stopped: <why>`.
    - `answer` (str): the last final answer given to the user ("" if none).
    """
