from __future__ import annotations

from aiflows_jarvis.PlanWriterFlowModule import PlanWriterFlow


class Planner_JarvisFlow(PlanWriterFlow):
    """Writes Jarvis's plan with the user: a PlanWriterFlow whose plan generator plans in steps Jarvis's executors
    can take (Coder for anything done with code, asking the user, intermediate and final answers).

    *Input Interface*:
    - `goal` (str): the user's goal.
    - `memory_files` (dict): `plan` is the file the plan is written to.

    *Output Interfaces*:
    - `plan` (str): the plan, also written to the plan file.
    - `summary` (str): the summary of the planner.
    - `status` (str): `finished`, or `stopped: <why>`.
    """
