"""The built-in parts, one module per axis, plus the named presets (presets.yaml).

Installed as `zoo.variants`. Importing it registers every part; `zoo.registry` does so on first use.
"""

from zoo.specs.registries import import_modules

import_modules(__name__, __path__)  # every module: each registers its parts
