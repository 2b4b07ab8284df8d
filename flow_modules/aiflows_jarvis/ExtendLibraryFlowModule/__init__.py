"""ExtendLibraryFlowModule: a boss that extends the code library (write_code, save_code, ask_user, re_plan,
update_plan)."""
dependencies = [
    {"url": "aiflows/CoreFlowModule", "revision": "main"},
    {"url": "aiflows/AbstractBossFlowModule", "revision": "main"},
    {"url": "aiflows/CodeLibraryFlowModule", "revision": "main"},
    {"url": "aiflows/CodeWriterFlowModule", "revision": "main"},
    {"url": "aiflows/HumanStandardInputFlowModule", "revision": "main"},
    {"url": "aiflows/ReplanningFlowModule", "revision": "main"},
    {"url": "aiflows/UpdatePlanFlowModule", "revision": "main"},
]

from .SaveCodeAtomicFlow import SaveCodeAtomicFlow  # noqa: E402
from .ExtendLibraryFlow import ExtendLibraryFlow  # noqa: E402
