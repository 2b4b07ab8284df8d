"""A controller/executor loop built from aiflows 0.1.7's own classes, as a user of aiflows would write it.

``ControllerExecutor`` is a ``CircularFlow`` of a controller chat (``ChatController``, in the style of the hub's
ChatAtomicFlow: every message of the chat is kept and sent again) and a ``BranchingFlow`` executor with one command,
``count_words``. Nothing of this project is used: it is the peer ``benchmarks/run.py`` compares the project's loop with.
"""

from .ChatController import ChatController
from .ControllerExecutor import ControllerExecutor
from .CountWords import CountWords
from .scripted import ScriptedBackend

__all__ = ["ChatController", "ControllerExecutor", "CountWords", "ScriptedBackend"]
