from __future__ import annotations

from typing import Any, Dict

from aiflows_jarvis.CoreFlowModule import (
    KINDS,
    ConfigurationError,
    LeanAtomicFlow,
    StrictJinjaPrompt,
    get_input_source,
)


class HumanStandardInputFlow(LeanAtomicFlow):
    """Shows a message rendered from a template and returns the user's answer.

    The answer comes from the run's input source (`RunContext(input_source=...)`): the terminal, auto-approve mode
    (`--yes`) or a scripted source in tests. In auto-approve mode an `approval` or `feedback` request is answered
    with "" (approve / looks good) and a `question` with "Use your best judgement.".

    *Configuration Parameters*:
    - `query_message_prompt_template` (dict): Jinja template of the message shown (`template`, `input_variables`),
      rendered strictly.
    - `kind` (str): `question` (free text), `approval` (empty answer approves) or `feedback` (empty answer means
      "looks good").
    - `return_inputs` (list): input keys passed on in the output (e.g. the `answer` shown to the user).

    *Input Interface*:
    - the template's `input_variables` (default: `question`).

    *Output Interface*:
    - `human_input` (str): the user's answer.
    - the `return_inputs` keys, as they were given.
    """

    def __init__(self, query_message_prompt_template: StrictJinjaPrompt, **kwargs):
        super().__init__(**kwargs)
        self.query_message_prompt_template = query_message_prompt_template
        if self.flow_config.get("kind", "question") not in KINDS:
            raise ConfigurationError(f"{self.flow_config['name']}: `kind` must be one of {KINDS}")

    @classmethod
    def instantiate_from_config(cls, config: Dict[str, Any]):
        import copy

        flow_config = copy.deepcopy(config)
        prompt = StrictJinjaPrompt.from_prompt(flow_config["query_message_prompt_template"])
        return cls(flow_config=flow_config, query_message_prompt_template=prompt)

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        message = self.query_message_prompt_template.render_from(input_data, self.flow_config["name"])
        answer = get_input_source().ask(message, kind=self.flow_config.get("kind", "question"))
        passed_on = {key: input_data[key] for key in self.flow_config.get("return_inputs") or [] if key in input_data}
        return {**passed_on, "human_input": answer}
