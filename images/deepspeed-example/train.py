"""Causal language-model training with Hugging Face's Trainer and DeepSpeed.

An ordinary training script: nothing in it knows about autotuning. Launched as

    deepspeed train.py --deepspeed ds_config.json --output_dir out --do_train [Trainer flags]

it trains --model_name_or_path on a text data set, cut into blocks of --block_size tokens. When the
DeepSpeed config enables its `autotuning` section (as every trial's config does), DeepSpeed's engine
itself measures the profiled steps, writes the metrics file and ends the process; see README.md.
Its one line for the autotuner, report_effective_values, adds what the engine really ran.
"""

import json
import sys
from dataclasses import dataclass, field
from itertools import chain
from typing import Optional

import datasets
from autotune_effective import report_effective_values
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    HfArgumentParser,
    Trainer,
    TrainingArguments,
    default_data_collator,
)


@dataclass
class DataArguments:
    model_name_or_path: str = field(
        default="gpt2", metadata={"help": "A model name on the Hub or a local directory."}
    )
    dataset_path: Optional[str] = field(
        default=None, metadata={"help": "A data set saved with datasets' save_to_disk."}
    )
    dataset_name: str = field(default="Salesforce/wikitext", metadata={"help": "A Hub data set."})
    dataset_config_name: Optional[str] = field(default="wikitext-2-raw-v1")
    text_column: str = field(default="text")
    block_size: int = field(default=1024, metadata={"help": "Tokens per training sample."})


def deepspeed_batch_defaults(argv):
    """The batch settings of the DeepSpeed config named by --deepspeed, as Trainer flag defaults.

    Hugging Face refuses a config whose batch sizes differ from its own flags. Trials pass the flag
    (the job's argMappings); taking the defaults from the config also serves a launch that passes
    no flag at all, such as a run with the tuned config.
    """
    path = None
    for i, word in enumerate(argv):
        if word == "--deepspeed" and i + 1 < len(argv):
            path = argv[i + 1]
        elif word.startswith("--deepspeed="):
            path = word.split("=", 1)[1]
    if path is None or not path.endswith(".json"):
        return {}
    with open(path, encoding="utf-8") as config_file:
        config = json.load(config_file)
    defaults = {}
    for key, flag in (
        ("train_micro_batch_size_per_gpu", "per_device_train_batch_size"),
        ("gradient_accumulation_steps", "gradient_accumulation_steps"),
    ):
        if isinstance(config.get(key), int):
            defaults[flag] = config[key]
    return defaults


def main():
    parser = HfArgumentParser((DataArguments, TrainingArguments))
    parser.set_defaults(**deepspeed_batch_defaults(sys.argv[1:]))
    # TrainingArguments reads the DeepSpeed config first, so that under ZeRO-3 the model below is
    # partitioned while it loads instead of being built whole on every GPU.
    data_args, training_args = parser.parse_args_into_dataclasses()

    tokenizer = AutoTokenizer.from_pretrained(data_args.model_name_or_path)
    model = AutoModelForCausalLM.from_pretrained(data_args.model_name_or_path)

    if data_args.dataset_path:
        raw = datasets.load_from_disk(data_args.dataset_path)
    else:
        raw = datasets.load_dataset(
            data_args.dataset_name, data_args.dataset_config_name, split="train"
        )
    block_size = min(data_args.block_size, tokenizer.model_max_length)

    def tokenize(batch):
        return tokenizer(batch[data_args.text_column])

    def group(batch):
        joined = {key: list(chain.from_iterable(batch[key])) for key in batch}
        length = len(joined["input_ids"]) // block_size * block_size
        blocks = {
            key: [values[i : i + block_size] for i in range(0, length, block_size)]
            for key, values in joined.items()
        }
        blocks["labels"] = [list(ids) for ids in blocks["input_ids"]]
        return blocks

    # Rank 0 tokenizes and caches; the other ranks then read its cache.
    with training_args.main_process_first(desc="tokenizing"):
        tokenized = raw.map(tokenize, batched=True, remove_columns=raw.column_names)
        train_dataset = tokenized.map(group, batched=True)

    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        data_collator=default_data_collator,
    )
    # The Trainer makes the DeepSpeed engine inside train(): model_wrapped, read at exit.
    report_effective_values(lambda: getattr(trainer, "model_wrapped", None))
    trainer.train()
    trainer.save_model()


if __name__ == "__main__":
    main()
