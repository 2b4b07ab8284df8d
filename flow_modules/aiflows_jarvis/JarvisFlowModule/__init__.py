"""JarvisFlowModule: Jarvis, the top boss (it plans with the user and has Coder do each step that takes code), and the
classes the original documents, each configuration over the generic flows."""

dependencies = [
    {"url": "aiflows/AbstractBossFlowModule", "revision": "main"},
    {"url": "aiflows/CoderFlowModule", "revision": "main"},
    {"url": "aiflows/ControllerFlowModule", "revision": "main"},
    {"url": "aiflows/HumanStandardInputFlowModule", "revision": "main"},
    {"url": "aiflows/PlanWriterFlowModule", "revision": "main"},
    {"url": "aiflows/UpdatePlanFlowModule", "revision": "main"},
]

from .Controller_JarvisFlow import Controller_JarvisFlow  # noqa: E402
from .CtrlExMem_JarvisFlow import CtrlExMem_JarvisFlow  # noqa: E402
from .FinalAns_Jarvis import FinalAns_Jarvis  # noqa: E402
from .IntermediateAns_Jarvis import IntermediateAns_Jarvis  # noqa: E402
from .JarvisFlow import JarvisFlow  # noqa: E402
from .Planner_JarvisFlow import Planner_JarvisFlow  # noqa: E402
from .UpdatePlanAtomicFlow import UpdatePlanAtomicFlow  # noqa: E402
