"""A few-layer transformer language model trained on random tokens with DeepSpeed.

An ordinary DeepSpeed training script, small enough for the CPU accelerator:

    deepspeed tiny_lm.py --deepspeed ds_config.json

The micro-batch, the ZeRO stage and everything else come from the config. Without an `optimizer`
section the script brings its own (torch's AdamW), as many scripts do. When the config enables
DeepSpeed's `autotuning` section, as every trial's config does, DeepSpeed's engine measures the
profiled steps, writes the metrics file and ends the process itself; report_effective_values (the
example image's) then adds what the engine ran. --zero-stage N builds the engine at stage N
whatever the config says, as scripts that take their own --zero_stage do.
"""

import argparse
import json
import os
import sys

import deepspeed
import torch
from torch import nn

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../images/deepspeed-example")
)
from autotune_effective import report_effective_values  # noqa: E402

VOCABULARY = 512
SEQUENCE = 64
WIDTH = 128
LAYERS = 2
HEADS = 4
STEPS = 40


class TinyLanguageModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCABULARY, WIDTH)
        self.position = nn.Parameter(torch.zeros(SEQUENCE, WIDTH))
        layer = nn.TransformerEncoderLayer(WIDTH, HEADS, 4 * WIDTH, dropout=0.0, batch_first=True)
        self.layers = nn.TransformerEncoder(layer, LAYERS)
        self.head = nn.Linear(WIDTH, VOCABULARY)
        self.register_buffer(
            "causal", torch.nn.Transformer.generate_square_subsequent_mask(SEQUENCE)
        )

    def forward(self, tokens):
        hidden = self.embedding(tokens) + self.position
        hidden = self.layers(hidden, mask=self.causal, is_causal=True)
        logits = self.head(hidden[:, :-1])
        return nn.functional.cross_entropy(
            logits.reshape(-1, VOCABULARY), tokens[:, 1:].reshape(-1)
        )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--deepspeed", required=True, help="the DeepSpeed config file")
    parser.add_argument("--local_rank", type=int, default=0)
    parser.add_argument("--zero-stage", type=int, help="override the config's ZeRO stage")
    arguments = parser.parse_args()
    with open(arguments.deepspeed, encoding="utf-8") as config_file:
        config = json.load(config_file)
    if arguments.zero_stage is not None:
        config.setdefault("zero_optimization", {})["stage"] = arguments.zero_stage

    torch.manual_seed(0)
    model = TinyLanguageModel()
    optimizer = None
    if "optimizer" not in config:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), optimizer=optimizer, config=config
    )
    report_effective_values(lambda: engine)
    batch = engine.train_micro_batch_size_per_gpu()
    generator = torch.Generator().manual_seed(engine.global_rank)
    for _ in range(STEPS * engine.gradient_accumulation_steps()):
        tokens = torch.randint(0, VOCABULARY, (batch, SEQUENCE), generator=generator)
        loss = engine(tokens.to(engine.device))
        engine.backward(loss)
        engine.step()


if __name__ == "__main__":
    main()
