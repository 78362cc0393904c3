"""`from_hf` and `to_hf`: reference models of `transformers` in the zoo and back, computing the
same function: every family in FAMILIES (encoder-decoders such as T5 and BART, decoder-only ones such
as GPT-2, Llama and Falcon, encoder-only ones such as BERT and ModernBERT; README's table lists all).

A family (a record of zoo.interop.family, registered by a module of zoo.interop) says three things:
the spec a reference model's configuration means, the reference configuration a spec means, and a
table from the zoo's canonical weight names to the reference's parameter names, or to views of them
(GPT-2's packed, transposed Conv1D weights). Both key sets are checked: a reference weight that no
row covers (and that is not one the zoo computes itself, such as Marian's sinusoid tables or
Llama's rotary frequencies, which are compared instead) is an error, never silently dropped.
"""

from __future__ import annotations

import copy
from itertools import chain
from typing import Any

import torch
from torch import Tensor, nn

from zoo.dropout.rates import FIELDS as DROPOUT_FIELDS
from zoo.dropout.rates import SITES
from zoo.errors import ConfigError, InteropError
from zoo.interop.family import FAMILIES, Family, family_of
from zoo.model.canonical import canonical_state, load_canonical_state
from zoo.model.kinds import ZooModel, build
from zoo.specs.catalog import validated
from zoo.specs.layer_rules import LAYER_KEYS
from zoo.specs.model_spec import ModelSpec
from zoo.specs.switches import flat_fields


def reference_tensors(model: nn.Module) -> dict[str, Tensor]:
    """Every parameter and buffer under every name, a shared one under each of its names."""
    return dict(chain(model.named_parameters(remove_duplicate=False), model.named_buffers(remove_duplicate=False)))


def mapped_state(family: Family, spec: ModelSpec, zoo_names: set[str], reference: dict[str, Tensor],
                 direction: str) -> tuple[dict[str, str], dict[str, Tensor]]:
    """The family's table for this spec, checked both ways against the zoo's and the reference's
    names, and every reference tensor or view the table may name. A row that names a tensor neither
    model has is a part this spec lacks (biases where it has none): a table lists every row its
    family may hold, and each tensor either side has must still find its row."""
    views = family.views(spec, reference)
    lookup = {**reference, **{name: view for name, (view, _) in views.items()}}
    table = {zoo: ref for zoo, ref in family.names(spec).items()  # a row of a part neither has: this spec lacks it
             if zoo in zoo_names or ref in lookup}
    problems = [f"the zoo's {name} has no reference weight" for name in sorted(zoo_names - table.keys())]
    problems += [f"{ref} is not a weight of the reference" for ref in sorted(set(table.values()) - lookup.keys())]
    problems += [f"the reference's {ref} has no zoo weight {zoo}" for zoo, ref in table.items() if zoo not in zoo_names]
    bases = {ref: views[ref][1] if ref in views else ref for ref in table.values()}
    covered = {id(reference[base]) for base in bases.values() if base in reference}
    computed = family.computed(spec)
    problems += [f"{name} has no place in the zoo" for name, tensor in reference.items()
                 if name not in table.values() and id(tensor) not in covered and name not in computed]
    for name, values in computed.items():
        kept = reference.get(name)  # compared at the dtype it is kept in: a model cast to half rounds its tables
        if kept is not None and not torch.allclose(kept.float().cpu(), values.to(kept.dtype).float(), atol=1e-6, rtol=0):
            problems.append(f"{name} differs from the table the zoo computes ({family.name} computes it, "
                            "never trains it)")
    if problems:
        raise ConfigError(f"{direction} ({family.name}): {'; '.join(problems[:4])}"
                          + (f"; and {len(problems) - 4} more" if len(problems) > 4 else ""))
    return table, lookup


def unlike_its_configuration(family: Family, model: nn.Module) -> list[str]:
    """Where the model differs from what its configuration builds: a tensor's shape or name, or a
    module's own setting (a head count, a scale). A configuration edited after the model was built
    describes another model; read as it is, it would reshape the weights into another function."""
    with torch.device("meta"):
        built = family.reference()(copy.deepcopy(model.config))
    have, want = reference_tensors(model), reference_tensors(built)
    found = [f"{name} has shape {tuple(have[name].shape)}, the configuration gives {tuple(tensor.shape)}"
             for name, tensor in want.items() if name in have and have[name].shape != tensor.shape]
    found += [f"{name} is missing" for name in want if name not in have]  # a tensor too many: mapped_state names it
    modules = dict(model.named_modules())
    for name, module in built.named_modules():
        ours = vars(modules[name]) if name in modules else {}
        found += [f"{name or 'the model'}.{key} is {ours[key]!r}, the configuration gives {value!r}"
                  for key, value in vars(module).items()
                  if isinstance(value, (bool, int, float, str)) and not key.startswith("_") and key != "training"
                  and key in ours and ours[key] != value]
    return found


def from_hf(model: nn.Module, **overrides: Any) -> ZooModel:
    """A zoo model computing the function of a reference model of any family in FAMILIES, with its
    weights (copied), device and mode. `overrides` set spec fields the reference's configuration
    leaves open (a pad_id where it has no pad token: GPT-2, GPT-NeoX, Llama; BLOOM's max_len)."""
    family = family_of(model)
    if any(t.is_meta for t in reference_tensors(model).values()):
        raise ConfigError(f"from_hf ({family.name}): the model's weights are on the meta device and hold no values "
                          "to copy; materialize them first (model.to_empty(device='cpu'), then load its weights)")
    unlike = unlike_its_configuration(family, model)
    if unlike:
        raise ConfigError(f"from_hf ({family.name}): the model is not what its configuration builds (was the "
                          f"configuration edited after the model was built?): {'; '.join(unlike[:4])}"
                          + (f"; and {len(unlike) - 4} more" if len(unlike) > 4 else ""))
    try:
        fields = {**family.spec_fields(model), **overrides}
        if fields.get("pad_id", 0) is None:
            raise InteropError("pad_id: the reference's configuration has no pad token, and the zoo's batches need one; "
                               "give zoo.from_hf(model, pad_id=ID), an id its inputs never hold")
        lacking = [name for name in ("bos_id", "eos_id") if name in fields and fields[name] is None]
        if lacking:
            token = " and ".join(name[:3] for name in lacking)
            raise InteropError(f"{', '.join(lacking)}: the reference's configuration has no {token} token "
                               f"({' and '.join(f'{name[:3]}_token_id' for name in lacking)} None), and the zoo's "
                               "decoding starts and stops at them; give zoo.from_hf(model, "
                               f"{', '.join(f'{name}=ID' for name in lacking)}), the ids its tokenizer uses")
        if fields.get("pad_id") is not None and fields.get("pad_id") == fields.get("eos_id") and "pad_id" not in overrides:
            raise InteropError(f"pad_id: the reference's configuration pads with its eos token ({fields['pad_id']}), and "
                               "the zoo's batches need a pad apart from eos (a padded row must not read as ended); give "
                               "zoo.from_hf(model, pad_id=ID), an id its inputs never hold")
        spec = validated(fields)
    except InteropError as err:  # the family's reader refused the configuration
        raise InteropError(f"from_hf ({family.name}): {err}") from err
    except ConfigError as err:  # the spec it read, or the overrides, did not validate
        raise ConfigError(f"from_hf ({family.name}): {err}") from err
    zoo_model = build(spec, seed=0)
    reference, own = reference_tensors(model), canonical_state(zoo_model)
    table, lookup = mapped_state(family, spec, set(own), reference, "from_hf")
    load_canonical_state(zoo_model, {name: lookup[ref].detach().reshape(own[name].shape).float().cpu()
                                     for name, ref in table.items()})
    weight = next(model.parameters())
    return zoo_model.to(device=weight.device, dtype=weight.dtype).train(model.training)


def expressible(spec: ModelSpec) -> dict[str, Any]:
    """The fields a reference must reproduce, `auto` resolved, each axis as in canonical names, and
    the layer count of a stack the kind lacks as 0: the model has no such layers, whatever it says."""
    encoder, decoder = spec.depths
    return {**flat_fields(spec.model_dump()), **{axis: str(choice) for axis, choice in spec.axes().items()},
            "n_encoder_layers": encoder, "n_decoder_layers": decoder,
            "d_ff": spec.ffn_width, "final_norm": spec.uses_final_norm, "output_bias": spec.logits_bias,
            "head_width": spec.d_head, "n_kv_heads": spec.kv_heads,
            **{f"{site}_dropout": spec.dropout_at(site) for site in SITES}}


def expressible_by_layer(spec: ModelSpec) -> dict[str, Any]:
    """expressible, with what per-layer rules may set read from each layer there is: a rule for every
    sixth layer changes nothing in four, and one that changes every layer is the spec's own setting."""
    fields = {key: value for key, value in expressible(spec).items() if key not in (*LAYER_KEYS, "layers")}
    read: dict[int, dict[str, Any]] = {}  # at_layer gives one spec per kind of layer: each is read once
    for stack, depth in zip(("encoder", "decoder"), spec.depths, strict=True):
        for i in range(depth):
            at = spec.at_layer(stack, i) if spec.layers else spec
            if id(at) not in read:
                layer = expressible(at)
                read[id(at)] = {key: layer[key] for key in LAYER_KEYS if key in layer}
            fields[f"{stack} layer {i}"] = read[id(at)]
    return fields


UNBUILT = "its configuration cannot be built"


def problems(family: Family, spec: ModelSpec, read: dict[bool, dict[str, Any]] | None = None) -> list[str]:
    """The fields of `spec` that the family's configuration cannot express, with what it would give.
    `read` keeps what `spec` expresses (whole, and layer by layer) for the next family asked."""
    try:
        with torch.device("meta"):
            reference = family.reference()(family.config(spec))
        expected = validated(family.spec_fields(reference))
    except Exception as err:  # any refusal of the family's configuration classes
        return [f"{UNBUILT} ({err})"]
    by_layer = bool(spec.layers or expected.layers)  # what each layer computes, not how the rules write it
    read = {} if read is None else read
    if by_layer not in read:
        read[by_layer] = expressible_by_layer(spec) if by_layer else expressible(spec)
    have, want = read[by_layer], expressible_by_layer(expected) if by_layer else expressible(expected)
    untie = not spec.embeddings.tie and expected.embeddings.tie  # to_hf unties the built reference
    return [f"{key} {have[key]!r} ({family.name}: {want.get(key)!r})" for key in have  # no such layer there: None
            if have[key] != want.get(key) and key not in (*family.free, *DROPOUT_FIELDS)  # training's rates: same function
            and not (key == "tie_embeddings" and untie)]


def untie(reference: nn.Module, table: dict[str, str], state: dict[str, Tensor]) -> None:
    """Give reference names that share one tensor but stand for different zoo tensors a tensor of
    their own (T5 1.1's output projection, which transformers 5 ties to the embedding)."""
    tensors = reference_tensors(reference)
    groups: dict[int, dict[int, list[str]]] = {}
    for zoo_name, ref in table.items():
        if ref in tensors and zoo_name in state:  # a view (zoo.interop.gpt2) is never one of several names of a tensor
            groups.setdefault(id(tensors[ref]), {}).setdefault(id(state[zoo_name]), []).append(ref)
    for classes in groups.values():
        for refs in sorted(classes.values(), key=len)[:-1]:  # the largest class keeps the tensor
            fresh = nn.Parameter(tensors[refs[0]].detach().clone())
            for ref in refs:
                owner, _, leaf = ref.rpartition(".")
                setattr(reference.get_submodule(owner), leaf, fresh)


def to_hf(model: ZooModel, family: str | None = None) -> nn.Module:
    """The reference model of `family` computing the zoo model's function, with its weights
    (copied), device and mode; by default the first family that expresses the spec exactly (mT5
    computes what T5 1.1 does: name it). A spec that no family can express is an error naming the
    fields and what the nearest family has instead."""
    if family is not None and family not in FAMILIES:
        raise ConfigError(f"to_hf family {family!r}; choices: {', '.join(sorted(FAMILIES))}")
    spec = model.spec
    read: dict[bool, dict[str, Any]] = {}
    found = {name: problems(FAMILIES[name], spec, read) for name in ([family] if family else FAMILIES)}
    name = min(found, key=lambda n: (bool(found[n]) and found[n][0].startswith(UNBUILT), len(found[n])))  # built first
    if found[name]:
        raise ConfigError(f"to_hf: {spec.name} is not a {name} model (the nearest family); it cannot express "
                          + "; ".join(found[name]))
    chosen = FAMILIES[name]
    reference = chosen.reference()(chosen.config(spec))
    state = canonical_state(model)
    untie(reference, chosen.names(spec), state)
    table, lookup = mapped_state(chosen, spec, set(state), reference_tensors(reference), "to_hf")
    with torch.no_grad():
        for zoo_name, ref in table.items():
            lookup[ref].copy_(state[zoo_name].reshape(lookup[ref].shape))
    weight = next(model.parameters())
    return reference.to(device=weight.device, dtype=weight.dtype).train(model.training)
