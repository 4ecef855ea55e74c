"""Where the reference finds a model's decoder layers and their checkpoint tensors
(`portkit.verify.reference.anatomy`), on small torch modules shaped like transformers' models."""

from __future__ import annotations

import pytest
import torch

from portkit.verify.reference.anatomy import NoDecoderLayers, decoder_layers, layer_key, module_paths


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(4)
        self.attn = torch.nn.Linear(4, 4)
        self.drop = torch.nn.Dropout(0.1)
        self.act = torch.nn.GELU()


class Other(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Linear(4, 4)


class Config:
    def __init__(self, layers: int) -> None:
        self.num_hidden_layers = layers

    def get_text_config(self) -> Config:
        return self


class Model(torch.nn.Module):
    """A language model's 4 blocks beside a vision tower's 2."""

    _no_split_modules = ["Block"]

    def __init__(self, lm: int = 4, tower: int = 2, tower_class: type = Block) -> None:
        super().__init__()
        self.config = Config(lm)
        self.tower = torch.nn.Module()
        self.tower.layers = torch.nn.ModuleList(tower_class() for _ in range(tower))
        self.lm = torch.nn.Module()
        self.lm.h = torch.nn.ModuleList(Block() for _ in range(lm))


def test_the_longest_list_of_the_decoder_layer_class():
    path, layers = decoder_layers(Model())
    assert path == "lm.h" and len(layers) == 4


def test_two_lists_as_long_are_refused_with_their_names():
    with pytest.raises(NoDecoderLayers, match=r"2 lists could each be its decoder layers \(tower.layers, lm.h\)"):
        decoder_layers(Model(lm=2, tower=2))


def test_the_recorded_class_wins_over_no_split_modules():
    model = Model(lm=2, tower=3, tower_class=Other)
    model._can_record_outputs = {"hidden_states": Block}
    assert decoder_layers(model)[0] == "lm.h"


def test_without_either_the_list_as_long_as_the_config_says():
    model = Model(lm=3, tower=2, tower_class=Other)
    model._no_split_modules = []
    assert decoder_layers(model)[0] == "lm.h"
    model.config.num_hidden_layers = 5
    with pytest.raises(NoDecoderLayers, match="no list of decoder layers"):
        decoder_layers(model)


def test_a_layers_checkpoint_names_by_the_lists_own_name():
    key = layer_key("transformer.h")
    assert key.findall("transformer.h.3.attn.c_attn.weight") == ["3"]
    assert key.findall("h.12.ln_1.weight") == ["12"]  # a legacy checkpoint without the prefix
    assert key.findall("transformer.wte.weight") == [] and key.findall("transformer.ln_f.weight") == []
    assert layer_key("model.layers").findall("model.layers.0.mlp.weight") == ["0"]


def test_sub_layers_are_the_modules_with_weights():
    assert module_paths(Block()) == ["ln_1", "attn"]  # not the dropout, not the activation
