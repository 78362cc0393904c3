"""A reference model whose configuration was edited after it was built, or whose weights hold no
values, is refused by from_hf with one line that says where, for every family: read as it is, the
configuration would reshape the weights into another function (the probe's BART, built with 2
heads and set to 4, came back with its logits off by 1e-3)."""

import pytest
import torch
from hf_references import REFERENCES

import zoo


def fresh(name: str):
    return REFERENCES[name]().eval()


@pytest.mark.parametrize("name", REFERENCES)
def test_a_head_count_edited_after_construction_is_refused(name):
    """Named by the module setting it changes (a head count; GPT-NeoX's head width) or a weight's shape."""
    model = fresh(name)
    built_with = model.config.num_attention_heads
    model.config.num_attention_heads = 2 * built_with  # each family's own name for it, through attribute_map
    with pytest.raises(zoo.ConfigError, match=rf"from_hf \(\S+\): the model is not what its configuration builds "
                                              r"\(was the configuration edited after the model was built\?\): .*"
                                              rf"(is {built_with}, the configuration gives {2 * built_with}|"
                                              r"head_size is \d+, the configuration gives \d+|has shape)"):
        zoo.from_hf(model)


@pytest.mark.parametrize("name", REFERENCES)
def test_a_width_edited_after_construction_names_a_weight_and_both_shapes(name):
    model = fresh(name)
    model.config.hidden_size *= 2
    with pytest.raises(zoo.ConfigError, match=r"the model is not what its configuration builds .*: \S+ has shape "
                                              r"\(\d+(, \d+)?\), the configuration gives \(\d+(, \d+)?\)"):
        zoo.from_hf(model)


@pytest.mark.parametrize("name", REFERENCES)
def test_weights_on_the_meta_device_are_refused_not_copied(name):
    with torch.device("meta"):
        model = fresh(name)
    with pytest.raises(zoo.ConfigError, match=r"the model's weights are on the meta device and hold no values"):
        zoo.from_hf(model)


def test_an_unedited_reference_still_imports_to_the_same_logits():
    """The check reads the modules and never changes them: the BART of the probe, left as built."""
    model = fresh("bart")
    ids = torch.tensor([[3, 4, 5, 2]])
    expected = model(input_ids=ids, decoder_input_ids=ids).logits
    got = zoo.from_hf(model)(ids, ids)
    assert torch.allclose(got, expected, atol=1e-5)
