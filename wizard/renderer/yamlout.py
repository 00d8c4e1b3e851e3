"""Strings in rendered YAML stay strings for every reader of the bundle: PyYAML's own resolvers decide what
PyYAML quotes, and OmegaConf (what verl's Hydra reads the config with) resolves more plain scalars to numbers
(`1e3`, `1_000.5`: omegaconf/_utils.py get_yaml_loader). A dumper given `omegaconf_resolvers` quotes a string
whenever either loader would read the plain text as something else."""

from __future__ import annotations

import re
from typing import Any

# omegaconf 2.3 omegaconf/_utils.py:154-167 (get_yaml_loader): the float resolver it adds to yaml.SafeLoader;
# used where omegaconf is not installed (the renderer does not need it)
_OMEGACONF_FLOAT = re.compile(
    r"""^(?:
     [-+]?[0-9]+(?:_[0-9]+)*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?[0-9]+(?:_[0-9]+)*(?:[eE][-+]?[0-9]+)
    |\.[0-9]+(?:_[0-9]+)*(?:[eE][-+][0-9]+)?
    |[-+]?[0-9]+(?:_[0-9]+)*(?::[0-5]?[0-9])+\.[0-9_]*
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)


def omegaconf_resolvers(dumper: Any) -> Any:
    """Give a yaml.SafeDumper subclass the implicit resolvers of OmegaConf's loader (so a string that OmegaConf
    would read as a number, a bool or null is written quoted); returns the class."""
    try:
        from omegaconf._utils import get_yaml_loader

        loader = get_yaml_loader()
        dumper.yaml_implicit_resolvers = {k: list(v) for k, v in loader.yaml_implicit_resolvers.items()}
    except ImportError:
        dumper.yaml_implicit_resolvers = {k: list(v) for k, v in dumper.yaml_implicit_resolvers.items()}
        dumper.add_implicit_resolver("tag:yaml.org,2002:float", _OMEGACONF_FLOAT, list("-+0123456789."))
    return dumper
