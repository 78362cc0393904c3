"""The kernels the built-in parts compute with, below both the parts (zoo.variants) and the model
that assembles them (zoo.model): attention with its masks and its FlexAttention path, expert
routing, and the probes that observe attention. Nothing here builds a part or reads a registry."""
