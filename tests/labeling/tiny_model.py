"""A tiny random-weight Qwen3 model and a BPE tokenizer trained on the shipped benchmark text, built locally.

Nothing is downloaded: the tokenizer is trained (tokenizers' BPE, byte-level, 2,048 tokens) on a few hundred
lines of data/benchmarks/*.parquet, and the model is `Qwen3ForCausalLM` with random weights (seeded) at a
size that runs lm-eval on a laptop CPU in seconds (≈0.2 M parameters). The folder loads with lm-eval's `hf`
backend exactly as a hub checkpoint would (config.json, model.safetensors, tokenizer.json, …).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from cr2.config import REPO_ROOT

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def corpus_lines(per_benchmark: int = 150) -> list[str]:
    """Lines of real benchmark text (questions, choices, MBPP code and tests) to train the tokenizer on."""
    lines: list[str] = []
    for name in ("mmlu", "bbh", "gpqa", "mbpp"):
        df = pd.read_parquet(REPO_ROOT / "data" / "benchmarks" / f"{name}.parquet").head(per_benchmark)
        for row in df.itertuples(index=False):
            lines.append(str(row.question))
            if row.choices is not None:
                lines.extend(str(c) for c in row.choices)
            if name == "mbpp":
                lines.append(str(row.target))
                lines.extend(str(t) for t in row.tests)
    # the prompt scaffolding lm-eval adds around the text
    lines += ["Answer: A", "Q: A:", "[BEGIN]", "[DONE]", "Choices:\n(A) (B) (C) (D)", "What is the correct answer"]
    return lines


def build_tiny_qwen3(out: Path, vocab_size: int = 2048, seed: int = 0, init_std: float | None = None) -> Path:
    """Write a random-weight Qwen3ForCausalLM (hidden 64, 2 layers, 4 heads) and its tokenizer to `out`.

    `init_std` draws every weight matrix from N(0, init_std²) instead of transformers' init (std 0.02, under
    which greedy decoding mostly repeats one token): at 0.2 the generations are varied text that ends at
    stop strings and end-of-sequence at different steps."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus_lines(), trainer)
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    cfg = Qwen3Config(
        vocab_size=len(hf_tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=2048, tie_word_embeddings=True,
        eos_token_id=hf_tok.eos_token_id, pad_token_id=hf_tok.pad_token_id, bos_token_id=None,
    )
    with torch.random.fork_rng():  # seed the init without touching the caller's global RNG state
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(cfg)
        if init_std is not None:
            with torch.no_grad():
                for p in model.parameters():
                    if p.dim() == 2:
                        p.normal_(0.0, init_std)
    model.save_pretrained(out)
    hf_tok.save_pretrained(out)
    return out
