"""Deprecated: the last release's path of ``chat_backends_skeleton`` and its companions; import them from
``aiflows_jarvis.CoreFlowModule``. This module goes in the next release."""

import warnings

from .flows.config_tree import chat_backends_skeleton, flow_class, flow_target_problem, root_of, walk_config

warnings.warn(
    "aiflows_jarvis.CoreFlowModule.config_tree is deprecated and goes in the next release: import "
    "chat_backends_skeleton from aiflows_jarvis.CoreFlowModule",
    DeprecationWarning,
    stacklevel=2,
)
__all__ = ["chat_backends_skeleton", "flow_class", "flow_target_problem", "root_of", "walk_config"]
