"""ExtendLibraryFlowModule: a boss that extends the code library: it writes and tests functions with the user and saves
them."""

dependencies = [
    {"url": "aiflows/CoreFlowModule", "revision": "main"},
    {"url": "aiflows/AbstractBossFlowModule", "revision": "main"},
    {"url": "aiflows/CodeLibraryFlowModule", "revision": "main"},
    {"url": "aiflows/CodeWriterFlowModule", "revision": "main"},
    {"url": "aiflows/UpdatePlanFlowModule", "revision": "main"},
]

from .ExtendLibraryFlow import ExtendLibraryFlow  # noqa: E402
from .SaveCodeAtomicFlow import SaveCodeAtomicFlow  # noqa: E402
