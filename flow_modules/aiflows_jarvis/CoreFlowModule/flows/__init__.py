"""The flow runtime: lean flow bases, configurations read and instantiated without hydra, strict prompt templates.

Import these from the package (``from aiflows_jarvis.CoreFlowModule import ...``).
"""
