"""LCToolFlowModule: any LangChain tool as a flow (tool_input -> observation); errors become observations."""

dependencies = [
    {"url": "aiflows/CoreFlowModule", "revision": "main"},
]

from .LCToolFlow import LCToolFlow, call_with_timeout, error_observation  # noqa: E402
