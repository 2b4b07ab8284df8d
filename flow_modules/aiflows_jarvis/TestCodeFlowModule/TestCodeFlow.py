from __future__ import annotations

from aiflows_jarvis.CoreFlowModule import LeanSequentialFlow, with_memory_files


class TestCodeFlow(LeanSequentialFlow):
    """Tests code written for the library, with the user: asks for tests, runs them, shows the result, asks feedback.

    A sequence of `AskForTests` (the tests the controller proposed, if any, are shown; the user types more tests, or
    Enter to run just those, or with none, to only check that the code compiles and its imports resolve),
    `CodeTest` (a TestCodeAtomicFlow) and `AskForFeedback` (the results are shown and the user says whether they
    are fine). In auto-approve mode the proposed tests run and the results are accepted.

    *Configuration Parameters*:
    - `memory_files` (dict, optional): must hold `code_library` if the input has no `memory_files`.
    - `subflows_config`: `AskForTests`, `CodeTest`, `AskForFeedback`.

    *Input Interface*:
    - `code` (str): the code to test.
    - `tests` (str, optional): tests the caller proposes (asserts calling the code), shown to the user first.
    - `memory_files` (dict): `code_library` is the library file.

    *Output Interface*:
    - `result` (str): the test report.
    - `passed` (bool): whether everything checked passed.
    - `feedback` (str): the user's feedback on the results ("" if fine).
    """

    __test__ = False  # a flow, not a pytest test class

    def run(self, input_data):
        data = dict(with_memory_files(self, input_data))
        # the caller's `tests` are a proposal; `tests` would otherwise be confused with what the user types
        data["proposed_tests"] = str(data.pop("tests", "") or "").strip()
        return super().run(data)
