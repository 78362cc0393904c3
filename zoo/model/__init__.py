"""The model's pieces: one block and one stack, the kinds of model (what they share and how each
frames its data in `zoo_model`, one module per kind, `kinds` to build one), attention's kernel and
cache, masks, initialization, canonical weights, decoding (greedy and beam search), weight
conversion between variants, and the size checks made before anything is allocated."""
