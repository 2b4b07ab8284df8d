"""The command-line applications, Jarvis and AutoGPT, over the flow modules: not part of any hub module."""
