"""OmegaConf's YAML loader, without importing omegaconf: configurations are read with it, and so is aiflows' logger
configuration when aiflows is imported (see ``deferred_imports``). Only the standard library and PyYAML."""

from __future__ import annotations

import functools
from typing import Any


@functools.lru_cache(maxsize=None)
def _yaml_loader():
    """OmegaConf's YAML loader (``omegaconf._utils.get_yaml_loader``: its float syntax, no timestamps, duplicate keys
    refused), written here so that reading a configuration does not import omegaconf; on libyaml's C parser when
    PyYAML has it (the same documents, read much faster)."""
    import pathlib
    import re

    import yaml

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            keys = set()
            for key_node, _ in node.value:
                if key_node.tag != yaml.resolver.BaseResolver.DEFAULT_SCALAR_TAG:
                    continue
                if key_node.value in keys:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"found duplicate key {key_node.value}",
                        key_node.start_mark,
                    )
                keys.add(key_node.value)
            return super().construct_mapping(node, deep=deep)

    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(
            r"""^(?:
         [-+]?[0-9]+(?:_[0-9]+)*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?[0-9]+(?:_[0-9]+)*(?:[eE][-+]?[0-9]+)
        |\.[0-9]+(?:_[0-9]+)*(?:[eE][-+][0-9]+)?
        |[-+]?[0-9]+(?:_[0-9]+)*(?::[0-5]?[0-9])+\.[0-9_]*
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
            re.X,
        ),
        list("-+0123456789."),
    )
    Loader.yaml_implicit_resolvers = {
        key: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for key, resolvers in Loader.yaml_implicit_resolvers.items()
    }
    for name in ("Path", "PosixPath", "WindowsPath"):
        Loader.add_constructor(
            f"tag:yaml.org,2002:python/object/apply:pathlib.{name}",
            lambda loader, node, cls=getattr(pathlib, name): cls(*loader.construct_sequence(node)),
        )
    loader = Loader
    if getattr(yaml, "__with_libyaml__", False):

        class CLoader(yaml.cyaml.CParser, Loader):  # the C parser first; OmegaConf's constructor and resolvers
            def __init__(self, stream):
                yaml.cyaml.CParser.__init__(self, stream)
                yaml.constructor.SafeConstructor.__init__(self)
                yaml.resolver.Resolver.__init__(self)

        loader = CLoader
    return loader


def load_yaml_text(text: str) -> Any:
    """A YAML document as OmegaConf's loader reads it (interpolations left as they are)."""
    import yaml

    return yaml.load(text, Loader=_yaml_loader())
