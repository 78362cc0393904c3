"""The named presets of the papers (presets.yaml beside this module), registered with the parts."""

from pathlib import Path

from zoo.specs.catalog import register_presets_file

register_presets_file(Path(__file__).with_name("presets.yaml"))
