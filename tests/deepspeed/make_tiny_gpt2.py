"""Makes, without any download, what images/deepspeed-example expects in /opt/model and /opt/data:
a GPT-2 of two small layers with a byte-level BPE tokenizer trained here, and a text data set
saved with datasets' save_to_disk.

    make_tiny_gpt2.py OUT_DIR    writes OUT_DIR/model and OUT_DIR/data, prints the parameter count
"""

import random
import sys
from pathlib import Path

import datasets
from tokenizers import ByteLevelBPETokenizer
from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

CONTEXT = 128
WORDS = ("the model trains on data with a batch of tokens and every step measures its speed "
         "while memory holds parameters gradients and optimizer states across ranks").split()


def sentences(count):
    chooser = random.Random(0)
    return [" ".join(chooser.choices(WORDS, k=chooser.randint(8, 40))) + "." for _ in range(count)]


def main():
    out = Path(sys.argv[1])
    text = sentences(2000)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(text, vocab_size=400, min_frequency=1, special_tokens=["<|endoftext|>"])
    tokenizer = GPT2TokenizerFast(
        tokenizer_object=bpe, model_max_length=CONTEXT, eos_token="<|endoftext|>",
        bos_token="<|endoftext|>", unk_token="<|endoftext|>",
    )
    tokenizer.save_pretrained(out / "model")
    config = GPT2Config(
        vocab_size=len(tokenizer), n_positions=CONTEXT, n_embd=64, n_layer=2, n_head=2,
        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
    )
    model = GPT2LMHeadModel(config)
    model.save_pretrained(out / "model")
    datasets.Dataset.from_dict({"text": text}).save_to_disk(str(out / "data"))
    print(sum(parameter.numel() for parameter in model.parameters()))


if __name__ == "__main__":
    main()
