"""The training recipe's registered choices: optimizers and learning-rate schedules, each a class
with typed settings, registered by name as the model's parts are (zoo list, zoo show)."""

from zoo.specs.registries import import_modules

import_modules(__name__, __path__)  # every module: each registers its optimizers or schedules
