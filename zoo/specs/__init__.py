"""The spec and naming: ModelSpec and ExperimentSpec, the registries of parts, part settings,
presets and canonical names, and the YAML they are written in."""
