from __future__ import annotations

from aiflows_jarvis.UpdatePlanFlowModule import UpdatePlanAtomicFlow as _UpdatePlanAtomicFlow


class UpdatePlanAtomicFlow(_UpdatePlanAtomicFlow):
    """Updates Jarvis's plan file with the updated plan, called by the controller when it sees that one step (or
    more) of the plan is done: the updated plan is the old plan with those steps marked done.

    *Input Interface*: `updated_plan` (str), `memory_files` (dict).

    *Output Interface*: `result` (str).
    """
