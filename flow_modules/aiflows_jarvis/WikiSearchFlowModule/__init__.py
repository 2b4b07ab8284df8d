"""WikiSearchFlowModule: a Wikipedia (MediaWiki API) search as a flow, with a timeout and a bounded answer."""

dependencies = [
    {"url": "aiflows/CoreFlowModule", "revision": "main"},
]

from .WikiSearchAtomicFlow import WikiSearchAtomicFlow  # noqa: E402
