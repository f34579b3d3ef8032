"""The query encoder: all-MiniLM-L6-v2 from the packaged weights, identical to sentence-transformers."""
from __future__ import annotations

import numpy as np
import pytest

from cr2.inputs.embed import embed_texts, load_encoder, router_text, router_texts

TEXTS = [
    "What is the capital of France?",
    "Write a function to find the shared elements from the given two lists.",
    "not ( True ) and ( True ) is",
    "Which of the following is a prime number?\nA. 4\nB. 6\nC. 7\nD. 9",
    "x " * 400,  # longer than max_seq_length: truncated like sentence-transformers does
]


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("encoders")


@pytest.fixture(scope="module", params=["onnx", "torch"])
def encoder(request, onnx_cache):
    return load_encoder(backend=request.param, cache_dir=onnx_cache)


def test_router_text_template():
    assert router_text("  Which is prime? ", ["4", "7"]) == "Which is prime?\nA. 4\nB. 7"
    assert router_text("Sort the words", None) == "Sort the words"
    assert router_texts(["q1", "q2"], [None, ["a", "b", "c", "d"]])[1].endswith("D. d")
    with pytest.raises(ValueError, match="differ in length"):
        router_texts(["q"], [])


def test_vectors_are_unit_norm_float32_and_in_input_order(encoder):
    v = embed_texts(TEXTS, batch_size=2, progress=False, encoder=encoder)
    assert v.shape == (len(TEXTS), 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    unsorted = embed_texts(TEXTS, batch_size=2, progress=False, encoder=encoder, sort_by_length=False)
    np.testing.assert_allclose(v, unsorted, atol=2e-6)  # length-sorted batching changes nothing but speed
    single = embed_texts(TEXTS[:1], progress=False, encoder=encoder)
    np.testing.assert_allclose(v[0], single[0], atol=2e-6)


def test_matches_sentence_transformers_on_the_same_folder(encoder):
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(encoder.path), device="cpu", local_files_only=True)
    st.max_seq_length = encoder.max_seq_length
    ref = st.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    ours = embed_texts(TEXTS, progress=False, encoder=encoder)
    np.testing.assert_allclose(ours, ref, atol=1e-5)


def test_onnx_and_torch_backends_compute_the_same_network(onnx_cache):
    onnx = embed_texts(TEXTS, progress=False, encoder=load_encoder(backend="onnx", cache_dir=onnx_cache))
    torch_ = embed_texts(TEXTS, progress=False, encoder=load_encoder(backend="torch"))
    np.testing.assert_allclose(onnx, torch_, atol=1e-6)  # float32 rounding only (measured ≈ 2e-7)


def test_onnx_export_is_cached_and_a_broken_cache_file_is_replaced(tmp_path):
    first = load_encoder(backend="onnx", cache_dir=tmp_path)
    (exported,) = list(tmp_path.glob("*.onnx"))
    assert not list(tmp_path.glob(".*tmp")), "no temporary file is left behind"
    stamp = exported.stat().st_mtime_ns
    assert load_encoder(backend="onnx", cache_dir=tmp_path) is first  # loaded once per process
    assert load_encoder(backend="onnx", cache_dir=tmp_path, max_seq_length=128) is not first  # other arguments
    assert exported.stat().st_mtime_ns == stamp, "a second load reuses the export"
    exported.write_bytes(b"truncated")
    enc = load_encoder(backend="onnx", cache_dir=tmp_path)
    assert enc is not first  # its export changed: loaded (and re-exported) afresh
    assert exported.stat().st_size > 1_000_000
    assert embed_texts(TEXTS[:2], progress=False, encoder=enc).shape == (2, 384)


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(ValueError, match="backend must be one of onnx, torch, onnx-int8"):
        load_encoder(backend="tensorrt")


def test_similar_questions_are_closer_than_unrelated_ones(encoder):
    v = embed_texts(["How do I sort a list in Python?", "Sorting a Python list", "The mitochondria is an organelle"],
                    progress=False, encoder=encoder)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.3


def test_int8_backend_loads_from_a_cached_atomic_quantised_export_and_stays_close(onnx_cache, tmp_path):
    fp32 = embed_texts(TEXTS, progress=False, encoder=load_encoder(backend="onnx", cache_dir=onnx_cache))
    enc = load_encoder(backend="onnx-int8", cache_dir=tmp_path)
    (quant,) = list(tmp_path.glob("*-int8-*.onnx"))
    assert not list(tmp_path.glob(".*tmp")), "no temporary file is left behind"
    fp32_size = next(p for p in tmp_path.glob("*.onnx") if p != quant).stat().st_size
    assert quant.stat().st_size < 0.75 * fp32_size  # int8 MatMul weights; the embedding tables stay float32
    got = embed_texts(TEXTS, progress=False, encoder=enc)
    assert got.shape == fp32.shape and got.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert not np.array_equal(got, fp32), "int8 is a different function, not the fp32 export under another name"
    assert float((got * fp32).sum(axis=1).min()) > 0.95  # close: cosine ≥ 0.986 measured on 48 real queries
    stamp = quant.stat().st_mtime_ns
    load_encoder(backend="onnx-int8", cache_dir=tmp_path)
    assert quant.stat().st_mtime_ns == stamp, "a second load reuses the quantised export"
    quant.write_bytes(b"truncated")
    again = embed_texts(TEXTS, progress=False, encoder=load_encoder(backend="onnx-int8", cache_dir=tmp_path))
    np.testing.assert_allclose(again, got, atol=1e-6)  # rebuilt: deterministic quantisation
    # activations are quantised per call over the whole padded batch: a text's int8 embedding depends on its
    # batch companions (unlike fp32, where they only move float32 rounding) — documented in cr2/inputs/embed.py
    alone = embed_texts(TEXTS[:1], progress=False, encoder=enc)
    assert float((alone[0] * got[0]).sum()) > 0.95


def test_int8_backend_keeps_its_embeddings_apart_in_the_warehouse():
    from cr2.config import EmbeddingSpec

    assert EmbeddingSpec(backend="onnx").store_name == EmbeddingSpec(backend="torch").store_name == "all-MiniLM-L6-v2"
    assert EmbeddingSpec(backend="onnx-int8").store_name == "all-MiniLM-L6-v2+int8"
