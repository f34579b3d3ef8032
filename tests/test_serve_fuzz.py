"""HTTP fuzz of `cr2 serve` from its own OpenAPI schema (schemathesis): on a small budget, valid
and invalid requests to every operation, and none is answered 500 — every answer is 2xx, 4xx, 502, 503
or 504, and an error carries a one-line JSON `detail`. The router is the stub of tests/test_serve_faults.py;
/v1/chat/completions forwards to the fault upstream in its plain mode.
"""
from __future__ import annotations

import json

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cr2.config import load_config
from cr2_cli.serve import create_app
from tests.fault_upstream import FaultUpstream
from tests.serve_helpers import free_port, running
from tests.test_serve_faults import ALLOWED, FaultRouter

UPSTREAM_PORT = free_port()


def _app():
    cfg = load_config()
    serving = cfg.serving.model_copy(update={"endpoints": {cfg.models[1].id: f"http://127.0.0.1:{UPSTREAM_PORT}/v1",
                                                           cfg.models[2].id: f"http://127.0.0.1:{UPSTREAM_PORT}/v1"},
                                             "timeout_s": 2.0, "max_body_bytes": 64 * 1024, "max_concurrency": 4})
    return create_app(cfg.model_copy(update={"serving": serving}), "unused",
                      router=FaultRouter([m.id for m in cfg.models]))


APP = _app()
schema = schemathesis.openapi.from_dict(APP.openapi())


def _stub_route_by_target(config, home, question, choices, target_accuracy, budget, distance_m=None,
                          benchmark="mmlu", seed=0, router=None):
    """Target mode needs a deployed warehouse (tests/test_targets.py); here it routes at one fixed point."""
    out = router.route(question, choices, 1.0, 0.1, distance_m, benchmark, seed)
    return {**out, "target_choice": {"target": target_accuracy if budget is None else budget}}


@pytest.fixture(scope="module")
def base_url():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("cr2_cli.online.route_by_target", _stub_route_by_target)
        with running(FaultUpstream(), port=UPSTREAM_PORT), running(APP) as base:
            yield base


@schema.parametrize()
@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
def test_fuzzed_requests_are_never_a_500(case, base_url):
    response = case.call(base_url=base_url, timeout=10)
    assert response.status_code in ALLOWED, (case.method, case.path, case.body, response.status_code, response.text[:300])
    if response.status_code >= 400:
        detail = json.loads(response.text)["detail"]
        assert isinstance(detail, str) and "Traceback" not in detail


# bodies schemathesis does not write: any Unicode (lone surrogates travel as JSON \ud83d escapes), integers of
# hundreds of digits, numbers as strings, wrong types — in every field the two POST endpoints read
_TEXT = st.text(st.characters(blacklist_categories=()), max_size=30)
_NUMBER = st.one_of(st.integers(min_value=-(10 ** 500), max_value=10 ** 500), st.floats(allow_nan=False),
                    _TEXT, st.booleans(), st.none(), st.lists(st.integers(), max_size=2))
_ROUTE = st.fixed_dictionaries({"query": _TEXT, "lam": _NUMBER},
                               optional={"choices": st.lists(_TEXT, max_size=4), "alpha": _NUMBER,
                                         "distance_m": _NUMBER, "seed": _NUMBER, "benchmark": _TEXT})
_CHAT = st.fixed_dictionaries({"messages": st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "system"]),
                                                                          "content": _TEXT}), min_size=1, max_size=3)},
                              optional={"cr2_lam": _NUMBER, "cr2_alpha": _NUMBER, "stream": _NUMBER})


@settings(max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(path_body=st.one_of(st.tuples(st.just("/route"), _ROUTE), st.tuples(st.just("/v1/chat/completions"), _CHAT)))
def test_hostile_text_and_numbers_are_never_a_500(path_body, base_url):
    import httpx

    path, body = path_body
    response = httpx.post(base_url + path, content=json.dumps(body).encode(), timeout=10,
                          headers={"content-type": "application/json"})
    assert response.status_code in ALLOWED, (path, body, response.status_code, response.text[:300])
    if response.status_code >= 400:
        assert isinstance(json.loads(response.text)["detail"], str)


# JSON bombs: bodies under max_body_bytes (1 MiB) holding more values than any request needs — wide arrays or objects
# of tiny values, at the top or inside a field — cheap to send, seconds of CPU to parse and check. Each is refused as
# too many values (413) before it is parsed, never a 500, and /health answers meanwhile.
_ATOMS = {"{}": b"{}", "[]": b"[]", "0": b"0", '""': b'""', "true": b"true"}
_BOMB = st.tuples(st.sampled_from(sorted(_ATOMS)), st.sampled_from(["array", "object"]),
                  st.sampled_from(["top", "/route choices", "chat messages"]), st.integers(101_000, 140_000))


def _bomb(atom: str, container: str, where: str, n: int) -> tuple[str, bytes]:
    value = _ATOMS[atom]
    inner = (b"[" + b",".join([value] * n) + b"]" if container == "array"
             else b"{" + b",".join([b'"":' + value] * n) + b"}")  # one key, repeated: JSON allows it
    if where == "/route choices":
        return "/route", b'{"query": "q", "lam": 1.0, "choices": ' + inner + b"}"
    if where == "chat messages":
        return "/v1/chat/completions", b'{"messages": ' + inner + b"}"
    return "/route", inner


@pytest.fixture(scope="module")
def roomy_base_url():
    """The fuzz app's setup with the default body limit (1 MiB): room for a bomb, so only the value budget refuses it."""
    cfg = load_config()
    app = create_app(cfg, "unused", router=FaultRouter([m.id for m in cfg.models]))
    with running(app) as base:
        yield base


@settings(max_examples=8, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(shape=_BOMB)
def test_json_bombs_are_refused_before_parsing_never_a_500(shape, roomy_base_url):
    import httpx

    path, raw = _bomb(*shape)
    assert len(raw) < 1 << 20
    response = httpx.post(roomy_base_url + path, content=raw, timeout=30, headers={"content-type": "application/json"})
    assert response.status_code == 413, (shape, response.status_code, response.text[:300])
    assert "JSON values" in response.json()["detail"]
    assert httpx.get(roomy_base_url + "/health", timeout=10).status_code == 200


# The value budget counts the commas, colons and opening brackets outside strings, in one linear pass: exact on any
# JSON (strings full of escaped quotes, backslashes and structural characters included), whatever the block size
# the scan reads in, and answered at once for text that sends a backtracking string scan into minutes.
_JSON_TEXT = st.text(st.sampled_from('"\\,:[]{}ab \u00e9'), max_size=12)
_JSON = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), _JSON_TEXT),
                     lambda inner: st.one_of(st.lists(inner, max_size=4),
                                             st.dictionaries(_JSON_TEXT, inner, max_size=4)), max_leaves=30)


def _structural_outside_strings(raw: bytes) -> int:
    """The reference count: one byte at a time, a string's escapes skipping the byte after the backslash."""
    n, in_string, escaped = 0, False, False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in b",:[{":
            n += 1
    return n


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(value=_JSON, chunk_bytes=st.sampled_from([1, 2, 3, 7, 64, 1 << 20]), slack=st.integers(-2, 2))
def test_the_value_count_is_exact_outside_strings_across_block_boundaries(value, chunk_bytes, slack):
    from cr2_cli.serve.security import json_values_exceed

    raw = json.dumps(value, ensure_ascii=False).encode()
    n = _structural_outside_strings(raw)
    limit = max(0, n + slack)
    assert json_values_exceed(raw, limit, chunk_bytes=chunk_bytes) == (n >= limit), (raw, limit)


_BACKTRACK = st.tuples(st.sampled_from([b'\\"', b"\\\\", b'\\\\\\"']), st.integers(1_000, 3_000),
                       st.booleans(), st.integers(100_000, 200_000))


@settings(max_examples=4, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(shape=_BACKTRACK)
def test_escape_runs_before_a_comma_flood_are_answered_within_2_s(shape, roomy_base_url):
    """A string of k escapes, closed or not, then m commas (≤ 1 MiB): a 413 (the commas outside a string) or a 422
    (inside an unterminated one) within 2 s, and /health answers after it at once."""
    import time

    import httpx

    escape, k, closed, m = shape
    raw = b'"' + escape * k + (b'"' if closed else b"") + b"," * m
    t0 = time.monotonic()
    response = httpx.post(roomy_base_url + "/route", content=raw, timeout=120,
                          headers={"content-type": "application/json"})
    took_s = time.monotonic() - t0
    assert response.status_code in (413, 422) and took_s < 2.0, (shape[1:], response.status_code, took_s)
    t0 = time.monotonic()
    assert httpx.get(roomy_base_url + "/health", timeout=10).status_code == 200 and time.monotonic() - t0 < 1.0
