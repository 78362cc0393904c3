"""Beam search: k = 1 is greedy, a hand-built model where beam beats greedy, exhaustive search
against brute force under every length penalty, batching, and the cache (the whole grid of
variants checks cached beam against uncached beam in test_variants)."""

import itertools

import pytest
import torch
from conftest import padded_batch, reference_greedy

import zoo
from zoo.model.beam import beam_search

PAD, BOS, EOS, A, B = 0, 1, 2, 3, 4


def random_model(name: str = "pre.sinusoidal.fused.relu", seed: int = 0, vocab: int = 6, **overrides):
    torch.manual_seed(seed)
    options = dict(vocab_size=vocab, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=2,
                   dropout=0.0, max_len=24)
    return zoo.build(name, **{**options, **overrides}).eval()


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("name", ["pre.sinusoidal.fused.relu", "post.rope.per_head.gelu", "pre.alibi.sdpa.swiglu"])
def test_one_beam_is_greedy_token_for_token(name, seed):
    """Rows stop at different steps, so eos and the padding after it are compared too."""
    model = random_model(name, seed)
    src = padded_batch([6, 3, 5, 4, 6, 2], 6, seed=seed)
    greedy = model.generate(src, max_new_tokens=9)
    assert torch.equal(beam_search(model, src, num_beams=1, max_new_tokens=9), greedy)
    with torch.no_grad():
        assert torch.equal(greedy, reference_greedy(model, src, 9))


def markov_model(table: dict[int, dict[int, float]]) -> zoo.EncoderDecoder:
    """A real model whose next-token distribution depends on the last token only, as in `table`
    (probabilities from each token): attention and feed-forward weights are zero, so the decoder's
    output at a position is a function of that position's token, and the generator is solved to
    give the table's log-probabilities."""
    model = random_model("pre.none.fused.relu", vocab=6, d_model=16)
    with torch.no_grad():
        for name, param in model.decoder.named_parameters():
            if "attn." in name or "ffn." in name:
                param.zero_()
        tokens = torch.arange(6)[:, None]
        hidden = model.decoder(tokens, None, model.encode(torch.tensor([[A, EOS]])).expand(6, -1, -1))[0][:, 0]
        target = torch.full((6, 6), -30.0)
        for token, row in table.items():
            for nxt, p in row.items():
                target[token, nxt] = torch.tensor(p).log()
        solution = torch.linalg.lstsq(torch.cat([hidden, torch.ones(6, 1)], dim=1), target).solution
        model.generator.weight.copy_(solution[:-1].T)
        model.generator.bias.copy_(solution[-1])
    return model


def test_beam_two_finds_the_better_sequence_that_greedy_misses():
    """From bos: A 0.6, B 0.4. From A: eos 0.4, A 0.3, B 0.3. From B: eos 0.9.
    Greedy takes A then eos (0.24); the best sequence is B eos (0.36)."""
    model = markov_model({BOS: {A: 0.6, B: 0.4}, A: {EOS: 0.4, A: 0.3, B: 0.3}, B: {EOS: 0.9, A: 0.05, B: 0.05}})
    src = torch.tensor([[A, B, EOS]])
    assert model.generate(src, max_new_tokens=5).tolist() == [[BOS, A, EOS]]
    assert model.generate(src, max_new_tokens=5, num_beams=2).tolist() == [[BOS, B, EOS]]
    assert model.generate(src, max_new_tokens=5, num_beams=2, use_cache=False).tolist() == [[BOS, B, EOS]]


def sequence_log_prob(model, src: torch.Tensor, ids: list[int]) -> float:
    """Sum of log-probabilities (full softmax) of `ids` after bos, by one teacher-forced pass."""
    tgt = torch.tensor([[BOS, *ids]])
    with torch.no_grad():
        logp = model(src, tgt[:, :-1]).double().log_softmax(-1)[0]
    return float(logp[torch.arange(len(ids)), torch.tensor(ids)].sum())


@pytest.mark.parametrize("length_penalty", [0.0, 0.6, 1.0, 2.0])
@pytest.mark.parametrize("seed", range(3))
def test_a_beam_wider_than_every_sequence_finds_the_brute_force_best(seed, length_penalty):
    """With 40 beams nothing is pruned up to 3 new tokens (1 + 3 + 9 eos endings, 27 unfinished),
    so the result is the best of all 40 sequences by score / length ** length_penalty."""
    model = random_model(seed=seed).double()
    src = padded_batch([5], 6, seed=seed)
    ordinary = [3, 4, 5]
    sequences = [[*body, EOS] for n in range(3) for body in itertools.product(ordinary, repeat=n)]
    sequences += [list(body) for body in itertools.product(ordinary, repeat=3)]
    scored = {tuple(ids): sequence_log_prob(model, src, ids) / len(ids) ** length_penalty for ids in sequences}
    best = max(scored, key=scored.get)
    runner_up = sorted(scored.values())[-2]
    assert scored[best] - runner_up > 1e-9  # a unique answer
    out = model.generate(src, max_new_tokens=3, num_beams=40, length_penalty=length_penalty)
    assert out[0, 1:].tolist()[: len(best)] == list(best)
    assert (out[0, 1 + len(best) :] == PAD).all()


def test_length_penalty_moves_the_choice_between_a_short_and_a_long_hypothesis():
    """A eos has probability 0.45 over 2 tokens; B B B (cut at the limit) 0.32 over 3. Summed
    log-probabilities prefer the short one; divided by length ** 2 the long one wins. 40 beams
    leave nothing out at 3 new tokens, so only the scoring decides."""
    model = markov_model({BOS: {A: 0.5, B: 0.5}, A: {EOS: 0.9, A: 0.06, B: 0.04}, B: {B: 0.8, EOS: 0.15, A: 0.05}})
    src = torch.tensor([[A, EOS]])
    assert model.generate(src, max_new_tokens=3, num_beams=40, length_penalty=0.0).tolist() == [[BOS, A, EOS]]
    assert model.generate(src, max_new_tokens=3, num_beams=40, length_penalty=2.0).tolist() == [[BOS, B, B, B]]


def test_a_batch_decodes_as_each_source_alone():
    model = random_model("post.t5.fused.geglu", seed=3)
    src = padded_batch([6, 2, 5, 4], 6, seed=7)
    batched = model.generate(src, max_new_tokens=8, num_beams=3, length_penalty=0.6)
    for row in range(src.size(0)):
        alone = model.generate(src[row : row + 1, : int((src[row] != 0).sum())], max_new_tokens=8, num_beams=3,
                               length_penalty=0.6)
        width = alone.size(1)
        assert torch.equal(batched[row, :width], alone[0]) and (batched[row, width:] == PAD).all()


def test_bad_beam_arguments_are_clear_errors():
    model = random_model()
    src = padded_batch([4], 6)
    with pytest.raises(ValueError, match="num_beams must be >= 1, got 0"):
        model.generate(src, num_beams=0)
    with pytest.raises(ValueError, match="max_new_tokens must be >= 0"):
        model.generate(src, max_new_tokens=-1, num_beams=2)
    with pytest.raises(ValueError, match="longer than max_len"):
        random_model("pre.learned.fused.relu").generate(src, max_new_tokens=40, num_beams=2)
