"""The memory folder's files: which file holds a memory, safe writes and reads, locks, logs, plans.

Import these from the package (``from aiflows_jarvis.CoreFlowModule import ...``).
"""
