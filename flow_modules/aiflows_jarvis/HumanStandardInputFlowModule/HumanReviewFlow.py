from __future__ import annotations

import os
import tempfile
from typing import Any, Dict, Optional

from aiflows_jarvis.CoreFlowModule import (
    APPROVAL,
    ConfigurationError,
    EditorError,
    LeanAtomicFlow,
    atomic_write,
    get_console,
    get_input_source,
    invisible_characters_note,
    is_approval,
)

from .editor import edit_file, editor_available, resolve_editor

_EDIT_WORDS = {"e", "edit", ":e"}


def review_result(output: Dict[str, Any], content_key: str, what: str, fence: str = "") -> str:
    """A review's outcome as a controller reads it: what the user did, then the draft as they left it, once.

    :param output: a HumanReviewFlow's output (``content_key``, ``feedback``, ``approved``, ``edited``).
    :param content_key: the key of the draft in ``output``.
    :param what: what the draft is, for the sentence ("plan", "code").
    :param fence: a code fence's language ("python"): the draft is shown in a fenced block.
    """
    draft = str(output.get(content_key) or "").rstrip()
    shown = f"```{fence}\n{draft}\n```" if fence else draft
    feedback = str(output.get("feedback") or "").strip()
    if output.get("approved"):
        done = (
            f"The user edited the {what} and approved it" if output.get("edited") else f"The user approved the {what}"
        )
        return f"{done}:\n{shown}"
    edited = " (after editing it)" if output.get("edited") else ""
    return (
        f"The user did not approve the {what}{edited}. Their feedback: {feedback or '(none)'}\n"
        f"The {what} they reviewed:\n{shown}"
    )


class HumanReviewFlow(LeanAtomicFlow):
    """Shows a draft (a plan, a function, a script) and lets the user approve it, edit it, or comment on it.

    The user answers Enter (or y / ok / lgtm) to approve, types a comment to have the draft revised, or types `e` to
    open the draft in their editor (`editor` in the config, else `$VISUAL`, else `$EDITOR`); after an edit the new
    draft is shown and the question is asked again. In auto-approve mode the draft is approved and no editor opens.

    *Configuration Parameters*:
    - `content_key` (str): the input key holding the draft, also the output key of the reviewed draft.
    - `title` (str): shown above the draft.
    - `file_suffix` (str): suffix of the temporary file the editor opens (`.txt`, `.py`, ...).
    - `editor` (str or null): editor command, e.g. `code --wait`; null means `$VISUAL` / `$EDITOR`.
    - `open_editor` (str): `ask` (the user types `e`), `auto` (the editor opens before the question) or `never`.
    - `role` (str): console colour role of the draft (`plan`, `code`, ...).
    - `options` (str): what the question says the user can do (the editor option is added when available).

    *Input Interface*:
    - `<content_key>` (str): the draft.
    - `draft_path` (str, optional): a file the draft is written to and kept in (else a temporary file is used for
      editing and removed).

    *Output Interface*:
    - `<content_key>` (str): the draft as the user left it (edited or not).
    - `feedback` (str): the user's comment; "" when approved.
    - `approved` (bool): whether the user approved the draft.
    - `edited` (bool): whether the user changed the draft in the editor.
    """

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        key = self.flow_config.get("content_key", "content")
        if key not in input_data:
            raise ConfigurationError(f"{self.flow_config['name']}: the input has no `{key}` (has {sorted(input_data)})")
        draft = str(input_data[key])
        draft_path = input_data.get("draft_path")
        if draft_path:  # the draft is kept in this file (e.g. the code run_code runs, in the workspace)
            atomic_write(draft_path, draft)
        configured = self.flow_config.get("editor")
        mode = self.flow_config.get("open_editor", "ask")
        can_edit = mode != "never" and editor_available(configured)
        edited = False
        console = get_console()
        title = self.flow_config.get("title", "Draft")
        console.show(self.flow_config.get("role", "plan"), f"{title}:", draft)

        if can_edit and mode == "auto":
            draft, changed = self._edit(draft, draft_path)
            edited = edited or changed

        while True:
            options = self.flow_config.get("options", "Enter to approve, or type feedback to have it revised")
            if can_edit:
                options += f", or 'e' to edit it in {resolve_editor(configured)[0]}"
            answer = get_input_source().ask(f"{options}.", kind=APPROVAL)  # under the draft's one heading
            if can_edit and answer.strip().lower() in _EDIT_WORDS:
                draft, changed = self._edit(draft, draft_path)
                edited = edited or changed
                continue
            approved = is_approval(answer)
            return {key: draft, "feedback": "" if approved else answer, "approved": approved, "edited": edited}

    def _edit(self, draft: str, draft_path: Optional[str] = None):
        if draft_path:
            path, keep = draft_path, True
        else:
            fd, path = tempfile.mkstemp(prefix="jarvis_draft_", suffix=self.flow_config.get("file_suffix", ".txt"))
            os.close(fd)
            keep = False
        try:
            atomic_write(path, draft)
            note = invisible_characters_note(draft)
            if note:  # the editor shows the raw text, where they may be drawn as nothing
                get_console().line("warning", note)
            try:
                changed = edit_file(path, self.flow_config.get("editor"))
            except EditorError as error:  # the draft is kept; the user is asked again
                get_console().line("error", str(error))
                return draft, False
            with open(path, "r", encoding="utf-8") as f:
                new_draft = f.read()
        finally:
            if not keep:
                os.unlink(path)
        console = get_console()
        if changed:
            console.show(self.flow_config.get("role", "plan"), "Your edited version:", new_draft)
        else:
            console.line("info", "(no changes)")
        return new_draft, changed
