"""What the user sees and answers: the console, the input sources, the terminal.

Import these from the package (``from aiflows_jarvis.CoreFlowModule import ...``).
"""
