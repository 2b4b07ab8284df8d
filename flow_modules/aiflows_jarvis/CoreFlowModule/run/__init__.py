"""One run: its context, what it counts (LLM calls, tokens, cost, tool calls), its budget, what it hides (keys),
LLM errors and retries, tool-call recording.

Import these from the package (``from aiflows_jarvis.CoreFlowModule import ...``).
"""
