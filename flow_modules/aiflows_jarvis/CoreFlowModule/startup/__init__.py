"""What runs before anything else of the package: the bundled tokenizer, litellm imported offline and quietly,
the imports deferred until their first use.

Import these from the package (``from aiflows_jarvis.CoreFlowModule import ...``).
"""
