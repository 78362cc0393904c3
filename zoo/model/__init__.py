"""The model's pieces: one block and one stack, the three kinds of model (`kinds`), attention's
kernel and cache, masks, initialization, canonical weights, decoding (greedy and beam search),
weight conversion between variants, and the size checks made before anything is allocated."""
