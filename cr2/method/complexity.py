"""Parameter and per-query FLOP counts of router heads, with one documented convention.

Convention (reproduces the paper's router-complexity table where the architecture is fixed):
- a dense layer x·W (+ b) costs 2·in·out FLOPs (one multiply and one add per weight); the bias is free;
- an element-wise activation (GELU, ReLU) or element-wise product/sum costs 1 FLOP per element
  (FiLM γ⊙h + β therefore costs 2·width);
- LayerNorm, the final sigmoid/temperature and argmax are not counted (normalisation and read-out);
- the shared frozen encoder (all-MiniLM-L6-v2) is excluded;
- a cosine k-NN search over n training vectors of dimension d costs 2·d·n (one dot product each).
Check: gate = 2·384·256 + 2·9·512 + 2·256·1 + 256 (GELU) + 512 (FiLM) = 207,104 ≈ 207.1k;
teacher = 4 · (2·384·256 + 256 + 2·256) = 789,504 ≈ 789.5k.
"""
from __future__ import annotations


def linear_flops(in_features: int, out_features: int) -> int:
    """FLOPs of one dense layer per query: 2·in·out."""
    return 2 * in_features * out_features


def elementwise_flops(width: int, ops: int = 1) -> int:
    """FLOPs of `ops` element-wise operations over a vector of `width`."""
    return ops * width


def knn_flops(dim: int, n_train: int) -> int:
    """FLOPs of one brute-force cosine search: 2·d·n_train."""
    return 2 * dim * n_train


def count_parameters(module) -> int:
    """Number of trainable parameters of a torch module (or 0 for None)."""
    if module is None:
        return 0
    return int(sum(p.numel() for p in module.parameters()))


# the shared frozen encoder every router reads (all-MiniLM-L6-v2): 6 layers, width 384, feed-forward 1536
MINILM_LAYERS, MINILM_WIDTH, MINILM_FFN = 6, 384, 1536


def minilm_flops_per_token() -> int:
    """Dense FLOPs per token of the shared encoder, this module's convention (attention scores, which grow with the
    sequence, excluded): per layer Q, K, V, O (4·2·d·d) and the feed-forward (2·2·d·f)."""
    return MINILM_LAYERS * (4 * linear_flops(MINILM_WIDTH, MINILM_WIDTH) + 2 * linear_flops(MINILM_WIDTH, MINILM_FFN))


def format_flops(flops: float) -> str:
    """Human form used in the paper's table: 207.1 k, 13.826 M."""
    if flops >= 1e9:
        return f"{flops / 1e9:.3f} G"
    if flops >= 1e6:
        return f"{flops / 1e6:.3f} M"
    return f"{flops / 1e3:.1f} k"
