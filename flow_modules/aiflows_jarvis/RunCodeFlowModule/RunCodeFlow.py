from __future__ import annotations

import os
import time
from typing import Any, Dict, Optional

from aiflows.base_flows import CircularFlow

from aiflows_jarvis.CodeLibraryFlowModule import legacy_file, package_dir
from aiflows_jarvis.CoreFlowModule import (
    JarvisError,
    LeanSequentialFlow,
    archive_copy,
    get_console,
    open_regular,
    with_memory_files,
)

_SUFFIX = {"python": ".py", "py": ".py", "python3": ".py", "bash": ".sh", "shell": ".sh", "sh": ".sh"}


class RunCodeFlow(LeanSequentialFlow):
    """Runs the controller's code with the user in the loop: file, review (edit), interpreter, result, feedback.

    The user sees and may edit exactly what runs: the code is written to a file in `code_runs/` beside the code
    library (else in the workspace), opened in their editor when one is configured (`editor`, else `$VISUAL`, else
    `$EDITOR`), and run by the interpreter (a persistent Jupyter kernel, or bash) only once they approve it; then
    the result is shown and they are asked for feedback. The controller gets the code actually run, the result and
    the feedback. In auto-approve mode no editor opens and the code runs as written.

    The library should change only through `save_code`, but code run here can overwrite it (`open("library.py",
    "w")`, a shell `>`). So it is read just before the run and compared after: if it was changed or deleted, the
    version from before is copied to `archive/`, and the user and the controller are told where.

    *Configuration Parameters*:
    - `subflows_config.UserReview`: a HumanReviewFlow (`editor`; `open_editor`: `auto`, the default here: the editor
      opens before the question; `ask`: only when the user types `e`; `never`).
    - `subflows_config.Interpreter`: an InterpreterAtomicFlow (`workspace`, `timeout`, `max_output_chars`); with
      no `workspace`, the folder of the code library (`memory_files.code_library`) is used; with another workspace
      (the user's working folder), the library's folder is the interpreter's `library_dir`: `import library` works
      in both.
    - `subflows_config.AskForFeedback`: a HumanStandardInputFlow.

    *Input Interface*:
    - `code` (str): the code to run.
    - `language` (str): `python` or `bash`/`shell`.
    - `memory_files` (dict, optional): where the code library is.

    *Output Interface*:
    - `code` (str): the code actually run (as the user left it).
    - `result` (str): the interpreter's output (or why the code was not run).
    - `feedback` (str): the user's feedback ("" if the result looks right).
    - `failed` (bool): the code raised an error, timed out or was not run.
    """

    def prestart(self) -> None:
        """Start the interpreter's kernel in the background, in the folder a run would use (see InterpreterAtomicFlow's
        ``prestart``); returns at once."""
        self._set_workspace(with_memory_files(self, {}))
        self._prestart_derived = self._derived
        self.subflows["Interpreter"].prestart()

    def _set_workspace(self, input_data: Dict[str, Any]) -> Optional[str]:
        """With no ``workspace`` configured, the interpreter runs in the code library's folder, and the library is
        importable from the workspace (``library_dir``); returns the library. What was derived so is kept in
        ``self._derived``. A kernel started in advance with settings derived from another library's folder (the run
        was given other memory files) is closed, and the settings derived again; configured ones (a working folder
        the user chose) are kept."""
        config = self.subflows["Interpreter"].flow_config
        library = (input_data.get("memory_files") or {}).get("code_library")
        folder = os.path.dirname(os.path.abspath(library)) if library else None
        prestarted, self._prestart_derived = getattr(self, "_prestart_derived", {}), {}
        if folder and any(config.get(key) == value != folder for key, value in prestarted.items()):
            self.subflows["Interpreter"].close()
            for key in prestarted:
                config[key] = None
        self._derived = {}
        if folder and not config.get("workspace"):
            config["workspace"] = self._derived["workspace"] = folder
        if folder and "library_dir" in config and not config["library_dir"]:
            config["library_dir"] = self._derived["library_dir"] = folder  # `import library` from another folder
        return library

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        input_data = with_memory_files(self, input_data)
        interpreter = self.subflows["Interpreter"]
        library = self._set_workspace(input_data)
        library_dir = os.path.dirname(os.path.abspath(library)) if library else None
        language = str(input_data.get("language") or "python").strip().lower()
        # the scripts run are kept beside the memory files (the library's folder), not in the user's working folder
        draft_path = self._new_script_path(os.path.join(library_dir or interpreter.workspace, "code_runs"), language)
        self._library_path: Optional[str] = library
        self._library_before: Optional[str] = None
        return super().run(
            {
                **input_data,
                "language": language,
                "draft_path": draft_path,
                "feedback": "",
                "result": "",
                "failed": False,
                "edited": False,
            }
        )

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
            self._library_before = self._read_library()  # the code runs next
            return {"code": output_payload["code"], "edited": bool(output_payload.get("edited"))}
        feedback = output_payload.get("feedback", "")
        return {
            self.flow_config.get("early_exit_key", "EARLY_EXIT"): True,
            "code": output_payload["code"],
            "feedback": feedback,
            "failed": True,
            "result": "The user did not let this code run. Their feedback: " + (feedback or "(none)"),
        }

    @CircularFlow.output_msg_payload_processor
    def after_run(self, output_payload: Dict[str, Any], src_flow) -> Dict[str, Any]:
        result = output_payload.get("interpreter_output", "")
        get_console().show("error" if output_payload.get("failed") else "result", "Result:", result)
        note = self._library_changed_note()
        if note:
            result = f"{result}\n{note}"
        if self.flow_state.get("edited"):  # the controller holds its own code, not the user's
            code = self.flow_state.get("code", "")
            result = f"(The user edited the code before it ran; it ran as:\n{code}\n)\n{result}"
        return {"result": result, "failed": bool(output_payload.get("failed"))}

    def _read_library(self) -> Optional[Dict[str, bytes]]:
        """``{path: content}`` of the library's files (a `library.py`, the package's modules), or None when no
        library is configured (a file that cannot be read is left out: this check must not fail a run)."""
        path = getattr(self, "_library_path", None)
        if not path:
            return None
        package = package_dir(path)
        paths = (
            [legacy_file(path)]
            + [os.path.join(package, name) for name in sorted(os.listdir(package)) if name.endswith(".py")]
            if os.path.isdir(package)
            else [legacy_file(path)]
        )
        found: Dict[str, bytes] = {}
        for one in paths:
            try:  # (a FIFO among the modules is not waited for: it is left out)
                with os.fdopen(open_regular(one), "rb") as f:
                    found[one] = f.read()
            except (OSError, JarvisError):
                pass
        return found

    def _library_changed_note(self) -> str:
        """If the code just run changed or deleted the library's files: keep their versions from before the run in
        `archive/`, warn the user, and return the note for the controller ('' if the library is as it was)."""
        before, self._library_before = getattr(self, "_library_before", None), None
        if not before:
            return ""
        after = self._read_library() or {}
        changed = [p for p in before if after.get(p) != before[p]]
        if not changed:
            return ""
        folder = os.path.dirname(legacy_file(self._library_path))
        names, kept = [], []
        for path in changed:
            name = os.path.relpath(path, folder)
            names.append(name)
            try:
                copy = archive_copy(
                    os.path.join(folder, name.replace(os.sep, ".")), before[path].decode("utf-8", errors="replace")
                )
                kept.append(copy)
            except (OSError, JarvisError) as error:
                kept.append(f"(not copied: {error})")
        what = "deleted" if all(p not in after for p in changed) else "changed"
        shown = ", ".join(names)
        where = (
            f"the version from before the run is kept in {', '.join(kept)}"
            if len(kept) == 1
            else f"the versions from before the run are kept in {', '.join(kept)}"
        )
        get_console().line("warning", f"This run {what} {shown}, the code library; {where}.")
        return (
            f"[{shown}, the code library, was {what} while this code ran; {where}. Functions are added to the "
            "library by saving them (save_code, which tests them), "
            "not by code run here.]"
        )
