from __future__ import annotations

from typing import Any, Dict

from aiflows_jarvis.HumanStandardInputFlowModule import HumanStandardInputFlow


class HumanFeedbackFlow(HumanStandardInputFlow):
    """Asks the user for feedback on the last command's result (the seed's HumanFeedbackFlow).

    The answer is returned as `human_feedback`; AutoGPTFlow appends it to the observation, so it goes into the
    controller's next message and into the memory. An answer in `stop_words` (`q`, `stop`) ends the run early: the
    flow sets the loop's early-exit key. With `--yes` nobody is asked and the answer is empty (no objection).

    *Configuration Parameters*:
    - `query_message_prompt_template` (dict): the message shown (variables: `command`, `command_args`, `result`).
    - `stop_words` (list): answers that end the run (compared without case and surrounding blanks).
    - `early_exit_key` (str): the key set to true to end the loop (the loop's `early_exit_key`).

    *Input Interface*:
    - `command` (str), `command_args` (dict), `result` (str): what was executed and what it gave.

    *Output Interface*:
    - `human_feedback` (str): the user's answer.
    - the early-exit key (true), when the user asked to stop.
    """

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        answer = str(super().run(input_data)["human_input"] or "").strip()
        output: Dict[str, Any] = {"human_feedback": answer}
        if answer.lower() in {str(w).strip().lower() for w in self.flow_config.get("stop_words") or []}:
            output[self.flow_config.get("early_exit_key") or "EARLY_EXIT"] = True
        return output
