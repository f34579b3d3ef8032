"""The hf backend's static-cache generation gives lm-eval's generations, byte for byte, on CPU.

Three levels, each against lm-eval's or transformers' own code:
- the token-id stop matcher (cr2/labels/lmeval/stops.py) against lm-eval's `MultiTokenEOSCriteria` on the same
  token sequences: crafted edge cases and seeded random ones;
- the generator (cr2/labels/lmeval/static_generation.py) against transformers' greedy `generate` with lm-eval's
  stopping criteria, one request at a time, with rows finishing at different steps and slots refilled;
- every benchmark through cr2's task definitions (`ChunkEvaluator`, i.e. `lm_eval.simple_evaluate`) with the old
  path (`hf.generation: lm-eval`) and the new one: equal generations, extracted answers and label rows.
"""
from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from cr2.labels.lmeval.static_generation import StaticGenerator, eos_token_ids, prompt_bucket
from cr2.labels.lmeval.stops import StopMatcher
from tests.labeling.tiny_model import build_tiny_qwen3

BENCHMARKS = ("mmlu", "bbh", "gpqa", "mbpp")
STOPS = ["Q:", "</s>", "<|im_end|>", "[DONE]", "\n\n", "é", "<|endoftext|>", "Answer"]


@pytest.fixture(scope="module")
def lively_model_dir(tmp_path_factory) -> Path:
    """The tiny Qwen3 with weights of std 0.2: varied text, stop strings and end-of-sequence at different steps."""
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3-lively") / "model", init_std=0.2)


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_model_dir))


def _load(model_dir: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(str(model_dir))


def lm_eval_first_stop(tokenizer, stops, prompt, tokens) -> int | None:
    """The step (1-based) after which lm-eval's stopping criteria end a generation of `tokens` (batch size 1)."""
    from lm_eval.models.utils_hf import stop_sequences_criteria

    criteria = stop_sequences_criteria(tokenizer, list(stops), len(prompt), 1)
    for n in range(1, len(tokens) + 1):
        ids = torch.tensor([list(prompt) + list(tokens[:n])])
        if any(bool(c(ids, None)) for c in criteria):
            return n
    return None


def matcher_first_stop(matcher: StopMatcher, tokens) -> int | None:
    for n in range(1, len(tokens) + 1):
        if matcher.fires(tokens[:n]):
            return n
    return None


# ---------------------------------------------------------------- the stop matcher
def test_the_token_id_stop_matcher_gives_lm_evals_verdict_on_edge_cases(tokenizer):
    ids = lambda s: tokenizer.encode(s, add_special_tokens=False)  # noqa: E731
    other = ids("x")
    cases = {
        # "Q:" is two tokens here ('Q', ':'): the stop appears only with the second
        "stop split across tokens": (other + ids("Q") + ids(":") + other, 3),
        "stop at the very first token": (ids("\n\n") + other * 3, 1),
        "special-token stop first": ([tokenizer.convert_tokens_to_ids("<|im_end|>")] + other, 1),
        "stop inside a longer token's text": (other + ids(" Q") + ids(":"), 3),
        "two-byte character split over byte tokens": (other + ids("é") + other, 3),
        "a broken character is no stop": (other + ids("é")[:1] + other + ids("é")[1:], None),
        # '<|im_end|>' is one token (window 3): spelled out over 10 tokens lm-eval never sees it whole
        "stop spelled over more tokens than lm-eval's window": (other + ids("<") + ids("|im_end|>"), None),
        "end of sequence as text in the window": (other * 2 + [tokenizer.eos_token_id], 3),
        "no stop": (other * 6, None),
    }
    assert len(ids("<") + ids("|im_end|>")) > len(ids("<|im_end|>")) + 2
    for prefilter in (True, False):
        matcher = StopMatcher(tokenizer, STOPS, vocab_size=len(tokenizer), prefilter=prefilter)
        assert matcher.prefiltered is prefilter  # the tiny tokenizer is byte-level BPE
        for name, (tokens, expected) in cases.items():
            assert lm_eval_first_stop(tokenizer, STOPS, ids("Q: hi\nA:"), tokens) == expected, name
            assert matcher_first_stop(matcher, tokens) == expected, (name, prefilter)


def test_the_token_id_stop_matcher_agrees_with_lm_eval_on_random_generations(tokenizer):
    """400 seeded random generations drawn to be full of stop material; the prefilter decodes few windows."""
    rng = random.Random(0)
    vocab = len(tokenizer)
    material = sorted({t for s in STOPS + ["Q", ":", " Q", "D", "ONE", "]", "\n", "</", "s>"]
                       for t in tokenizer.encode(s, add_special_tokens=False)}
                      | {tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_end|>")})
    matcher = StopMatcher(tokenizer, STOPS, vocab_size=vocab + 5)  # ids beyond the tokenizer decode to nothing
    fired = 0
    steps = 0
    for _ in range(400):
        tokens = [rng.choice(material) if rng.random() < 0.4 else rng.randrange(vocab + 5) for _ in range(24)]
        expected = lm_eval_first_stop(tokenizer, STOPS, [], tokens)
        assert matcher_first_stop(matcher, tokens) == expected, tokens
        fired += expected is not None
        steps += expected or len(tokens)
    assert 100 < fired < 400  # both outcomes are exercised
    assert matcher.decoded_windows < steps / 2  # most steps were settled on token ids alone


def test_a_non_byte_level_tokenizer_decodes_every_window(tokenizer):
    import copy

    plain = copy.deepcopy(tokenizer)
    plain.clean_up_tokenization_spaces = True  # the decoded text is no longer the tokens' bytes
    matcher = StopMatcher(plain, STOPS, vocab_size=len(tokenizer))
    assert not matcher.prefiltered
    tokens = tokenizer.encode("x x Q: y", add_special_tokens=False)
    assert matcher_first_stop(matcher, tokens) == lm_eval_first_stop(plain, STOPS, [], tokens)
    assert matcher.decoded_windows >= len(STOPS)


# ---------------------------------------------------------------- the generator
def test_static_generation_equals_transformers_generate_one_request_at_a_time(lively_model_dir):
    """Prompts of several length buckets, 3 rows per batch: rows end at stop strings, end-of-sequence or
    max_gen_toks (16) at different steps and their slots take waiting requests; every row's ids equal `generate`'s
    for that request alone with lm-eval's stopping criteria."""
    import pandas as pd
    from lm_eval.models.utils_hf import stop_sequences_criteria

    from cr2.config import REPO_ROOT

    model, tok = _load(lively_model_dir)
    questions = pd.read_parquet(REPO_ROOT / "data" / "benchmarks" / "bbh.parquet")["question"].sample(14, random_state=1)
    prompts = [tok.encode(f"Q: {q}\nA:") for q in questions]
    assert len({prompt_bucket(len(p), 2048) for p in prompts}) >= 3
    stops = ["er", "Q:", "\n\n", tok.decode([tok.eos_token_id])]
    gen_toks = 16
    eos = eos_token_ids(model)
    matcher = StopMatcher(tok, stops, vocab_size=model.config.vocab_size)
    generator = StaticGenerator(model, "cpu")
    got = generator.generate(prompts, gen_toks, lambda t: t[-1] in eos or matcher.fires(t), 3, tok.pad_token_id)
    expected = []
    for p in prompts:
        out = model.generate(torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long),
                             max_length=len(p) + gen_toks, do_sample=False, pad_token_id=tok.pad_token_id,
                             stopping_criteria=stop_sequences_criteria(tok, stops, len(p), 1))
        expected.append(out[0, len(p):].tolist())
    assert got == expected
    lengths = [len(t) for t in got]
    assert min(lengths) < gen_toks and max(lengths) == gen_toks and len(set(lengths)) >= 4  # rows ended apart
    stats = generator.stats
    buckets = len({prompt_bucket(len(p), 2048) for p in prompts})
    assert stats.prefills > buckets  # finished rows were refilled within a bucket
    assert stats.generated_tokens == sum(lengths) and stats.requests == len(prompts)
    assert stats.compile_s == 0 and stats.compiled_shapes == []  # CPU: eager


def test_prefill_in_parts_gives_the_same_tokens(lively_model_dir, monkeypatch):
    """Prompts go through the model PREFILL_TOKENS tokens at a time (bounded memory): one row per forward here."""
    from cr2.labels.lmeval import static_generation

    model, tok = _load(lively_model_dir)
    prompts = [tok.encode(f"Q: {q}\nA:") for q in ("what is two and two?", "name a colour", "spell cat", "why?")]
    whole = StaticGenerator(model, "cpu").generate(prompts, 10, lambda t: False, 4, tok.pad_token_id)
    monkeypatch.setattr(static_generation, "PREFILL_TOKENS", 1)
    generator = StaticGenerator(model, "cpu")
    assert generator.generate(prompts, 10, lambda t: False, 4, tok.pad_token_id) == whole
    assert generator.stats.prefills == len(prompts)


def test_a_failing_compiler_leaves_the_eager_step_with_the_same_tokens(lively_model_dir, monkeypatch):
    model, tok = _load(lively_model_dir)
    prompts = [tok.encode("Q: what is two and two?\nA:"), tok.encode("Q: name a colour\nA:")]
    eager = StaticGenerator(model, "cpu").generate(prompts, 8, lambda t: False, 2, tok.pad_token_id)

    def broken_compile(fn, **kwargs):
        def run(*args, **kw):
            raise RuntimeError("inductor: no C++ compiler found\nmore detail")
        return run

    monkeypatch.setattr(torch, "compile", broken_compile)
    generator = StaticGenerator(model, "cpu", compile="on")
    assert generator.generate(prompts, 8, lambda t: False, 2, tok.pad_token_id) == eager
    assert generator.stats.compile_error == "RuntimeError: inductor: no C++ compiler found"
    assert generator.compile is False


# ---------------------------------------------------------------- every benchmark, old path vs new
def _queries(ingested_template, label_data_dir, per_benchmark: int):
    from cr2.config import load_config
    from cr2_tasks.label import _selection
    from cr2_warehouse.db import Warehouse

    config = load_config(overrides={"data_dir": str(label_data_dir)})
    with Warehouse(ingested_template, read_only=True) as wh:
        queries = _selection(wh, str(ingested_template), list(BENCHMARKS), per_benchmark)
    return config, queries


def _label_both_paths(model_dir: Path, config, queries, tmp_path: Path, templates: dict) -> dict:
    from cr2.labels.lmeval.backends import backend_plan, load_lm
    from cr2.labels.lmeval.runner import ChunkEvaluator
    from cr2_tasks.label import _mbpp_fewshot
    from tests.labeling.conftest import cpu_spec

    out = {}
    # 4 rows per batch on both paths (lm-eval's loglikelihoods change in the last bits with the batch): the static
    # path refills a finished row's slot, lm-eval's holds each batch until its last row stops
    for generation, batch in (("lm-eval", 4), ("static", 4)):
        spec = cpu_spec(model_dir, templates=templates,
                        hf={"dtype": "float32", "device": "cpu", "batch_size": batch, "num_threads": 1,
                            "generation": generation})
        lm = load_lm(backend_plan("hf", spec, str(model_dir), None, "tiny"))
        evaluator = ChunkEvaluator(lm, spec, tmp_path / generation)
        fewshot = {"mbpp": _mbpp_fewshot(config, spec)}
        out[generation] = {b: evaluator.evaluate(b, queries[queries["benchmark"] == b], fewshot.get(b))
                           for b in BENCHMARKS}
        out[generation + "_lm"] = lm
    return out


def _assert_identical(results: dict) -> dict[str, list[str]]:
    generations = {}
    for b in BENCHMARKS:
        old, new = results["lm-eval"][b], results["static"][b]
        assert len(old.samples) == len(new.samples) > 0
        for key in ("query_id", "prompt", "generation", "answer", "loglikelihoods", "correct"):
            assert [s.get(key) for s in new.samples] == [s.get(key) for s in old.samples], (b, key)
        assert new.rows.equals(old.rows), b  # the label rows: correct and output_tokens
        generations[b] = [s.get("generation") for s in new.samples]
    assert results["static_lm"].generation_stats.requests == sum(len(g) for b, g in generations.items()
                                                                if b in ("bbh", "mbpp"))
    assert results["static_lm"].fallback_reasons == []  # every generation ran on the static path
    return generations


def test_every_benchmark_labels_the_same_on_both_paths_with_the_shared_tiny_model(
        tiny_model_dir, ingested_template, label_data_dir, tmp_path):
    """cr2's task definitions as they are (BBH and MBPP to 256 tokens)."""
    config, queries = _queries(ingested_template, label_data_dir, 4)
    generations = _assert_identical(_label_both_paths(tiny_model_dir, config, queries, tmp_path, {}))
    assert all(len(g) == 4 for g in generations.values())


def test_every_benchmark_labels_the_same_on_both_paths_with_varied_generations(
        lively_model_dir, ingested_template, label_data_dir, tmp_path):
    """The lively model, 64-token generations, and stop strings it meets often ("e", "(") beside the tasks' own:
    answers end at stop strings, at the first token, at end-of-sequence and at max_gen_toks."""
    config, queries = _queries(ingested_template, label_data_dir, 6)
    templates = {"bbh": {"max_gen_toks": 64, "until": ["e", "Q:", "</s>", "<|im_end|>"]},
                 "mbpp": {"max_gen_toks": 64, "until": ["(", "[DONE]"]}}
    results = _label_both_paths(lively_model_dir, config, queries, tmp_path, templates)
    generations = _assert_identical(results)
    texts = generations["bbh"] + generations["mbpp"]
    assert len(set(texts)) >= 8 and "" in texts  # varied, and some stopped at the first token
    assert len({len(t) for t in texts}) >= 6  # answers of many lengths: rows ended at different steps


def test_the_compile_cache_goes_under_the_home_unless_the_user_chose_one(monkeypatch, tmp_path):
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    from cr2.labels.lmeval.static_generation import _inductor_cache_is_default
    from cr2_tasks.label import compile_cache

    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    assert _inductor_cache_is_default()
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", default_cache_dir())  # what torch fills in on first use
    assert _inductor_cache_is_default()
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    assert not _inductor_cache_is_default()
    monkeypatch.delenv("CR2_CACHE", raising=False)
    assert compile_cache(tmp_path / "home") == tmp_path / "home" / "cache" / "torch-compile"
    assert compile_cache(None, tmp_path / "staging") == tmp_path / "staging" / "torch-compile"
