from __future__ import annotations

import os
import time
from typing import Any, Dict

from aiflows.base_flows import CircularFlow

from flow_modules.aiflows.CoreFlowModule import LeanSequentialFlow, get_console
from flow_modules.aiflows.CoreFlowModule.memory import with_memory_files

_SUFFIX = {"python": ".py", "py": ".py", "python3": ".py", "bash": ".sh", "shell": ".sh", "sh": ".sh"}


class RunCodeFlow(LeanSequentialFlow):
    """Runs the controller's code with the user in the loop: file, review (edit), interpreter, result, feedback.

    The code is written to a file in the workspace (`code_runs/`), shown, and opened in the user's editor when one is
    configured (`editor` in the config, else `$VISUAL`, else `$EDITOR`), as the original Jarvis opened it in VS Code;
    when the editor is closed, the code (as the user left it) is shown and runs when the user approves it (Enter);
    the user may edit it again (`e`), or type feedback instead of running it. The interpreter (a persistent Jupyter
    kernel for Python, bash for shell code) runs what the file holds; the result is shown and the user is asked for
    feedback. The controller gets the code actually run, the result and the feedback. In auto-approve mode no editor
    opens, the code runs as written and the result is accepted.

    *Configuration Parameters*:
    - `subflows_config.UserReview`: a HumanReviewFlow (`editor`; `open_editor`: `auto`, the default here: the editor
      opens before the question; `ask`: only when the user types `e`; `never`).
    - `subflows_config.Interpreter`: an InterpreterAtomicFlow (`workspace`, `timeout`, `max_output_chars`); with
      no `workspace`, the folder of the code library (`memory_files.code_library`) is used, so `import library`
      works.
    - `subflows_config.AskForFeedback`: a HumanStandardInputFlow.

    *Input Interface*:
    - `code` (str): the code to run.
    - `language` (str): `python` or `bash`/`shell`.
    - `memory_files` (dict, optional): where the code library is.

    *Output Interface*:
    - `code` (str): the code actually run (as the user left it).
    - `result` (str): the interpreter's output (or why the code was not run).
    - `feedback` (str): the user's feedback ("" if the result looks right).
    """

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        input_data = with_memory_files(self, input_data)
        interpreter = self.subflows["Interpreter"]
        library = (input_data.get("memory_files") or {}).get("code_library")
        if not interpreter.flow_config.get("workspace") and library:
            interpreter.flow_config["workspace"] = os.path.dirname(os.path.abspath(library))
        language = str(input_data.get("language") or "python").strip().lower()
        draft_path = self._new_script_path(os.path.join(interpreter.workspace, "code_runs"), language)
        return super().run({**input_data, "language": language, "draft_path": draft_path, "feedback": "",
                            "result": ""})

    @staticmethod
    def _new_script_path(folder: str, language: str) -> str:
        """``code_runs/run_<time>_<n><suffix>``: a new name each time, without listing the folder."""
        stamp, number = time.strftime("%Y%m%d-%H%M%S"), 1
        suffix = _SUFFIX.get(language, ".txt")
        while os.path.exists(os.path.join(folder, f"run_{stamp}_{number}{suffix}")):
            number += 1
        return os.path.join(folder, f"run_{stamp}_{number}{suffix}")

    @CircularFlow.output_msg_payload_processor
    def after_review(self, output_payload: Dict[str, Any], src_flow) -> Dict[str, Any]:
        if output_payload.get("approved"):
            return {"code": output_payload["code"]}
        feedback = output_payload.get("feedback", "")
        return {self.flow_config.get("early_exit_key", "EARLY_EXIT"): True, "code": output_payload["code"],
                "feedback": feedback,
                "result": "The user did not let this code run. Their feedback: " + (feedback or "(none)")}

    @CircularFlow.output_msg_payload_processor
    def after_run(self, output_payload: Dict[str, Any], src_flow) -> Dict[str, Any]:
        result = output_payload.get("interpreter_output", "")
        get_console().show("error" if output_payload.get("failed") else "result", "Result:", result)
        return {"result": result, "failed": bool(output_payload.get("failed"))}
