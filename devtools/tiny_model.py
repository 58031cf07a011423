"""A tiny random-weight Llama with a locally trained tokenizer, made offline in seconds.

Its text is gibberish but vLLM serves it like any model, so every count the platform
sees (prompt, cached, generated, aborted) is real engine accounting. The tests and
`make run` build one into a directory:

    python -m devtools.tiny_model DIR
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

# A chat template in the Llama 3 shape: every message is framed by header tokens, so a
# system prompt costs its text plus a few tokens of scaffolding.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{{ message['content'] | trim }}<|eot_id|>"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
SPECIAL_TOKENS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
WORDS = (
    "the a customer order refund invoice shipping account please thanks help question answer "
    "policy return delivery price product service support ticket status update search document "
    "context retrieve tool call plan reason step json key value name id date amount total "
    "you we they it is are was be have has can will would should could not and or but if then"
).split()


def _corpus(lines: int = 4000, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 24))]
        if rng.random() < 0.3:
            words.append(json.dumps({rng.choice(WORDS): rng.choice(WORDS), "id": rng.randint(0, 999)}))
        out.append(" ".join(words) + rng.choice([".", "?", "!", ""]))
    return out


def build_tiny_model(directory: Path | str, *, vocab_size: int = 1024, layers: int = 2, seed: int = 0) -> Path:
    """Write config, random weights, tokenizer and chat template to `directory`."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    raw.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    raw.train_from_iterator(_corpus(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        bos_token="<|begin_of_text|>",
        eos_token="<|eot_id|>",
        pad_token="<|end_of_text|>",
        model_max_length=4096,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(path)

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
        dtype="float32",
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(path, safe_serialization=True)
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m devtools.tiny_model", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("directory", help="where to write the model (created if missing)")
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args(argv)
    print(build_tiny_model(args.directory, layers=args.layers))


if __name__ == "__main__":
    main()
