from __future__ import annotations

from aiflows_jarvis.HumanStandardInputFlowModule import HumanStandardInputFlow


class IntermediateAns_Jarvis(HumanStandardInputFlow):
    """Gives the user an intermediate answer (a step is done) and gets their feedback; depending on it, the
    controller continues, re-plans, and so on.

    *Input Interface*: `answer` (str).

    *Output Interface*: `human_input` (str): the user's feedback ("" if none).
    """

    # Its block's title names the step ("Jarvis's final answer:"): its loop shows no line for it.
    says_its_step = True
