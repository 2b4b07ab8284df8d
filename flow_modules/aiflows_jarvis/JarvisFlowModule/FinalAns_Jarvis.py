from __future__ import annotations

from aiflows_jarvis.HumanStandardInputFlowModule import HumanStandardInputFlow


class FinalAns_Jarvis(HumanStandardInputFlow):
    """Gives the user the final answer and gets their feedback (the controller finishes if they are satisfied).

    *Input Interface*: `answer` (str).

    *Output Interface*: `human_input` (str): the user's feedback ("" if satisfied); `answer` (str): as given.
    """

    # Its block's title names the step ("Jarvis's final answer:"): its loop shows no line for it.
    says_its_step = True
