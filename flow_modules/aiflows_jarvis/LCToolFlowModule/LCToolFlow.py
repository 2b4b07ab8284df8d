from __future__ import annotations

import warnings
from typing import Any, Dict, Optional

from aiflows_jarvis.CoreFlowModule import (
    ConfigurationError,
    LeanAtomicFlow,
    check_time,
    current_flow_path,
    instantiate,
    run_tool,
    shorten,
    start_thread,
    tool_timeout,
)


def call_with_timeout(call, timeout: Optional[float], what: str) -> Any:
    """``call()`` in a daemon thread, waited for at most ``timeout`` seconds (None: no limit). A tool's network call
    cannot be cancelled: one that overruns is left to finish in the background, and TimeoutError is raised."""
    if not timeout:
        return call()
    outcome: Dict[str, Any] = {}

    def target():
        try:
            outcome["value"] = call()
        except BaseException as error:  # noqa: BLE001 - handed to the caller
            outcome["error"] = error

    thread = start_thread(target, name=f"tool-{what}")  # it sees the run (its budget, console, recorder)
    thread.join(float(timeout))
    if thread.is_alive():
        raise TimeoutError(f"no answer within {timeout:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def error_observation(tool: str, error: BaseException) -> str:
    """What the controller reads when a tool failed: it can try another query or another tool."""
    text = str(error).strip() or type(error).__name__
    return (
        f"Error: the tool {tool} failed ({type(error).__name__}: {shorten(text, 500)}). Try another query or "
        "another command."
    )


class LCToolFlow(LeanAtomicFlow):
    """Runs a LangChain tool: the seed's adapter. The tool is the `backend` (`_target_`: any LangChain tool class,
    e.g. `langchain_community.tools.DuckDuckGoSearchRun`), built on the first call, so the flow builds without
    LangChain installed.

    The tool's keyword arguments are the flow's `input_interface` keys; its answer is the `observation`. A tool that
    raises or times out gives an observation saying so, never a crash, so the controller can try something else.
    Calls go through `run_tool`, so a run's transcript records them and a replay answers them without the network.

    *Configuration Parameters*:
    - `backend` (dict): the LangChain tool, `{_target_: <tool class>, ...its parameters}`.
    - `input_interface` (list): the tool's keyword arguments (e.g. `[query]`).
    - `timeout` (float): seconds a call may take (null: no limit), cut to the time the run's budget (`--max-time`)
      leaves: a call the budget cuts short stops the run.
    - `max_observation_chars` (int): the longest observation returned.

    *Input Interface*:
    - the tool's arguments (`input_interface`).

    *Output Interface*:
    - `observation` (str): what the tool answered, or what went wrong.
    """

    def __init__(self, backend: Optional[Any] = None, **kwargs):
        super().__init__(**kwargs)
        self._backend = backend

    @property
    def backend(self) -> Any:
        if self._backend is None:
            config = self.flow_config.get("backend")
            if not isinstance(config, dict) or not config.get("_target_") or config["_target_"] == "???":
                raise ConfigurationError(
                    f"{self.flow_config['name']}: `backend._target_` must name a LangChain "
                    "tool class, e.g. langchain_community.tools.DuckDuckGoSearchRun"
                )
            try:
                with warnings.catch_warnings():  # langchain-community warns at import that it is being sunset
                    warnings.simplefilter("ignore", DeprecationWarning)
                    self._backend = instantiate(config, recursive=True)
            except ImportError as error:
                raise ConfigurationError(
                    f"{self.flow_config['name']}: the tool {config['_target_']} cannot be imported ({error}). "
                    'Install the LangChain tools with: pip install -e ".[autogpt]"'
                ) from None
            except Exception as error:  # noqa: BLE001 - hydra wraps the real error
                cause = error.__cause__ or error
                raise ConfigurationError(
                    f"{self.flow_config['name']}: cannot build the tool {config['_target_']}: {cause}"
                ) from None
        return self._backend

    def tool_input(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        keys = self.flow_config.get("input_interface") or list(input_data)
        return {key: input_data[key] for key in keys if key in input_data}

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        name = self.flow_config["name"]
        where = current_flow_path() or name
        tool_input = self.tool_input(input_data)
        limit = int(self.flow_config.get("max_observation_chars") or 0)

        def call() -> str:
            try:
                backend = self.backend
                observation = call_with_timeout(
                    lambda: backend.run(tool_input=tool_input),
                    tool_timeout(self.flow_config.get("timeout"), where),
                    name,
                )
            except ConfigurationError:
                raise  # a configuration mistake stops the run; the model cannot fix it
            except Exception as error:  # noqa: BLE001 - the controller reads it and tries something else
                check_time(where)  # unless the run's time is up: then the budget stops the run
                return error_observation(name, error)
            text = observation if isinstance(observation, str) else str(observation)
            return shorten(text, limit) if limit else text

        return {"observation": run_tool(where, tool_input, call)}
