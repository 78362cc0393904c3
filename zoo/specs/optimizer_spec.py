"""The optimizer of an experiment: a registered optimizer (zoo.optim) by name, the rate and weight
decay every one takes, and its own typed settings beside them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import ConfigDict, Field, PositiveFloat, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from zoo.specs.choices import settings_error, settings_model
from zoo.specs.registries import UnknownChoiceError, registry
from zoo.specs.strict import Strict, unknown_keys


class OptimizerSpec(Strict):
    """A registered optimizer (zoo.optim) by name, the rate and weight decay every one takes, and
    its own settings beside them (`{name: sgd, lr: 0.1, momentum: 0.9}`), every default written out."""

    model_config = ConfigDict(extra="allow")
    synonyms: ClassVar[dict[str, str]] = {"learning_rate": "'lr'", "type": "'name'"}
    name: str = "adam"
    lr: PositiveFloat = 2e-3
    weight_decay: float = Field(0.0, ge=0.0)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        """The optimizer's settings model names unknown keys (with its settings), not this level."""
        return data

    @model_validator(mode="before")
    @classmethod
    def _the_optimizers_settings(cls, data: Any) -> Any:
        if isinstance(data, str):  # `optimizer: sgd`: the name alone, as a schedule may be given
            data = {"name": data}
        if isinstance(data, OptimizerSpec) or not isinstance(data, Mapping):
            return data
        name = data.get("name", "adam")
        try:
            model = settings_model(registry("optimizer").get(name))
        except UnknownChoiceError as err:
            raise PydanticCustomError("unknown_optimizer", "{text}", {"text": str(err)}) from None
        known = [*cls.model_fields, *model.model_fields]
        unknown = [key for key in data if key not in known]
        if unknown:
            raise PydanticCustomError("unknown_field", "{text}", {"text": unknown_keys(unknown, known, cls.synonyms)})
        common = {key: value for key, value in data.items() if key in cls.model_fields}
        try:
            settings = model.model_validate({key: value for key, value in data.items() if key not in cls.model_fields})
        except ValidationError as err:
            raise settings_error("optimizer", name, model, err) from None
        return {**common, **settings.model_dump()}

    def replace(self, **changes: Any) -> OptimizerSpec:
        """A copy with `changes`; another optimizer's name leaves this one's own settings behind."""
        if changes.get("name", self.name) == self.name:
            return super().replace(**changes)
        return self.validated_copy({**{key: getattr(self, key) for key in type(self).model_fields}, **changes})

    @property
    def settings(self):
        """The optimizer's own settings, typed."""
        return settings_model(registry("optimizer").get(self.name)).model_validate(self.model_extra or {})
