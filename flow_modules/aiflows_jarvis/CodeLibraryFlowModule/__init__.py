"""CodeLibraryFlowModule: the code library Jarvis writes and reuses, as a package of modules in the memory folder.

- ``source``: a library text's names, definitions and summary, from one parse per version of the text;
- ``package``: the package `library/` (one module per topic): its files and the index of what each module defines;
- ``save``: saving code into one module, with the checks a change needs, and migrating a single-file `library.py`;
- ``summary``: the library as callers read it (made or migrated first): its entries, structure and summary.

The package's own ``__init__.py`` (written into the memory folder) is ``library_init.py``: `from library import f`
imports only the module that defines ``f``.
"""

dependencies = [
    {"url": "aiflows/CoreFlowModule", "revision": "main"},
]

from .package import (  # noqa: E402
    INDEX_FOLDER,
    INDEX_VERSION,
    definition_sources,
    entries_of_source,
    legacy_file,
    library_location,
    load_index,
    once_per_version,
    package_dir,
)
from .save import (  # noqa: E402
    bound_names_of,
    check_module_name,
    default_module,
    library_digests,
    migrate_library,
    save_code,
    used_names,
)
from .source import defined_names, definition_spans, library_summary, split_future_imports  # noqa: E402
from .summary import (  # noqa: E402
    ensure_library,
    library_entries,
    library_structure,
    package_summary,
    render_entry,
    summary_head,
)

__all__ = [
    "bound_names_of",
    "check_module_name",
    "default_module",
    "defined_names",
    "definition_sources",
    "definition_spans",
    "ensure_library",
    "entries_of_source",
    "INDEX_FOLDER",
    "INDEX_VERSION",
    "legacy_file",
    "library_digests",
    "library_entries",
    "library_location",
    "library_structure",
    "library_summary",
    "load_index",
    "migrate_library",
    "once_per_version",
    "package_dir",
    "package_summary",
    "render_entry",
    "save_code",
    "split_future_imports",
    "summary_head",
    "used_names",
]
