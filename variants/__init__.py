"""The built-in parts, one module per axis, plus the named presets (presets.yaml).

Installed as `zoo.variants`. Importing it registers every part; `zoo.registry` does so on first use.
"""

from zoo.variants import attention, ffn, norm_types, norms, positions  # noqa: F401  (registers the parts)
