"""The memory folder's files: which file holds a memory, safe writes and reads, locks, logs, plans.

Import these from the package (``from aiflows_jarvis.CoreFlowModule import ...``). The names below are also here for
one release, where the last release's README imported them from (``CoreFlowModule.memory``).
"""

from .folder import memory_files_of, memory_path, set_memory_files, with_memory_files
