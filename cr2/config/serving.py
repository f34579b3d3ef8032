"""Serving settings of `cr2 serve`."""
from __future__ import annotations


from pydantic import Field, field_validator
from cr2.config.base import StrictModel


class ServingSpec(StrictModel):
    """`cr2 serve`: where the routed models answer (OpenAI-compatible endpoints) and the server's defaults."""

    endpoints: dict[str, str] = Field(default_factory=dict, description="model id → OpenAI-compatible base URL "
                                      "(…/v1) of the server that runs it; needed by /v1/chat/completions")
    served_names: dict[str, str] = Field(default_factory=dict, description="model id → model name the endpoint "
                                         "expects (default: the model's hf_name)")
    api_key_env: str | None = Field(None, description="environment variable holding the endpoints' API key")
    timeout_s: float = Field(120.0, gt=0, allow_inf_nan=False, description="upstream deadline, s: a non-streamed "
                             "answer must be complete within it (else 504); a streamed one may pause at most this "
                             "long between bytes")
    stream_timeout_s: float = Field(600.0, gt=0, allow_inf_nan=False, description="longest a streamed upstream answer "
                                    "may last, s; then it ends with an SSE error event and frees its slot")
    connect_timeout_s: float = Field(10.0, gt=0, allow_inf_nan=False, description="upstream connect timeout, s")
    default_lam: float = Field(1.0, gt=0, allow_inf_nan=False, description="λ when a chat request names none")
    token_env: str = Field("CR2_SERVE_TOKEN", description="environment variable holding the bearer token clients "
                           "must send (Authorization: Bearer …); required when bound beyond loopback")
    allowed_hosts: list[str] = Field(default_factory=list, description="Host names accepted besides the loopback names "
                                     "and the bound address ('*': any; DNS-rebinding guard)")
    allowed_origins: list[str] = Field(default_factory=list, description="browser origins (scheme://host[:port]) "
                                       "allowed to call the API besides the server's own")
    max_body_bytes: int = Field(1 << 20, ge=1024, description="largest request body, bytes (larger: 413)")
    max_prompt_chars: int = Field(32_768, ge=1, description="longest routed query text, characters (longer: 413)")
    max_concurrency: int = Field(8, ge=1, description="requests decided or forwarded at once; more wait")
    queue_timeout_s: float = Field(10.0, gt=0, allow_inf_nan=False, description="how long a request waits for a "
                                   "free slot before 503 Retry-After")
    header_timeout_s: float = Field(10.0, gt=0, allow_inf_nan=False, description="how long a client may take to send "
                                    "a request's headers before the connection is closed (slow-header clients)")
    body_timeout_s: float = Field(10.0, gt=0, allow_inf_nan=False, description="how long a client may take to send a "
                                  "request body, s, extended by min_body_rate_bps (slow-body clients are disconnected)")
    min_body_rate_bps: float = Field(1024.0, gt=0, allow_inf_nan=False, description="each byte of a request body "
                                     "received buys 1 / min_body_rate_bps s more of body_timeout_s, bytes/s")
    write_timeout_s: float = Field(10.0, gt=0, allow_inf_nan=False, description="how long a client may leave an "
                                   "answer unread (the connection's send buffer full, nothing taken) before the "
                                   "connection is closed, s; a streamed answer then ends and frees its slot (slow "
                                   "readers)")
    max_response_bytes: int = Field(64 << 20, ge=1024, description="largest upstream answer passed on, bytes (after "
                                    "decompression; larger: 502)")
    # micro-batching of concurrent /route requests into length-bucketed encoder calls (cr2_cli/serve/batching.py)
    batch_max_size: int = Field(1, ge=1, le=1024, description="most /route requests per micro-batch (1: no batching)")
    batch_max_wait_ms: float = Field(2.0, ge=0, le=1000, description="longest a request waits for companions, ms")
    batch_call_overhead_tokens: float = Field(16.0, ge=0, allow_inf_nan=False, description="an encoder call's fixed "
                                              "cost in padded tokens: a batch is split into length buckets where "
                                              "another call costs less than the padding it saves")
    reload_interval_s: float = Field(0.25, ge=0, allow_inf_nan=False, description="how often a running server looks "
                                     "for a newer threshold table (a re-calibration) and swaps to it without a "
                                     "restart, s (0: never)")
    embedding_cache_size: int = Field(4096, ge=0, description="query embeddings kept in the LRU cache (0: no cache)")
    torch_threads: int = Field(1, ge=1, le=256, description="torch intra-op threads of the serving process (the "
                               "per-request teacher and gate see one row: more threads only spin; the ONNX encoder "
                               "keeps the threads it was loaded with)")

    @field_validator("endpoints")
    @classmethod
    def _endpoint_urls(cls, endpoints: dict[str, str]) -> dict[str, str]:
        """http(s) base URLs without credentials: a `user:pass@` part would make the HTTP client send Basic auth
        instead of the configured bearer key (api_key_env), silently; credentials belong in api_key_env."""
        from urllib.parse import urlsplit

        for model_id, url in endpoints.items():
            try:
                parts = urlsplit(url)
                parts.port  # noqa: B018  (raises ValueError on a non-numeric port)
            except ValueError as exc:
                raise ValueError(f"serving.endpoints.{model_id} is not a URL ({exc})") from None
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"serving.endpoints.{model_id} must be an http:// or https:// URL with a host")
            if parts.username is not None or parts.password is not None:
                raise ValueError(f"serving.endpoints.{model_id} holds credentials (user:password@); remove them and "
                                 "put the endpoints' key in the variable named by serving.api_key_env")
        return endpoints
