"""A minimal OpenAI-compatible /v1/completions server over a local transformers model, on 127.0.0.1.

It implements the two calls lm-eval's `local-completions` model makes, as `vllm serve` answers them:
- scoring: `echo: true, logprobs: 1, max_tokens: 1` → per-token `token_logprobs` and `top_logprobs` of the
  prompt (the first entry None) plus one greedy token;
- generation: greedy decoding up to `max_tokens`, cut at the first `stop` string.
Prompts arrive as token-id lists (lm-eval's `tokenized_requests: true`) or strings. One request at a time
reaches the model (a lock); the HTTP server itself is threaded, so lm-eval's concurrent requests queue.
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class FakeCompletionsServer:
    """`with FakeCompletionsServer(model_dir) as url:` serves the model at url (…/v1/completions)."""

    def __init__(self, model_dir: Path):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.torch = torch
        self.tok = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []  # every payload received (the test inspects them)
        self.server: ThreadingHTTPServer | None = None

    # ---------------------------------------------------------------- the model side
    def _ids(self, prompt: Any) -> list[int]:
        if isinstance(prompt, str):
            return self.tok(prompt, add_special_tokens=False)["input_ids"]
        return [int(t) for t in prompt]

    def _logprobs(self, ids: list[int]):
        with self.torch.no_grad():
            return self.model(self.torch.tensor([ids])).logits[0].float().log_softmax(-1)

    def _score(self, ids: list[int]) -> dict[str, Any]:
        lp = self._logprobs(ids)
        token_lps: list[float | None] = [None]
        tops: list[dict[str, float] | None] = [None]
        for pos in range(1, len(ids)):
            row = lp[pos - 1]
            best = int(row.argmax())
            token_lps.append(float(row[ids[pos]]))
            tops.append({self.tok.decode([best]): float(row[best])})
        best = int(lp[-1].argmax())  # the one generated token (max_tokens: 1)
        token_lps.append(float(lp[-1][best]))
        tops.append({self.tok.decode([best]): float(lp[-1][best])})
        return {"text": self.tok.decode([best]), "logprobs": {"token_logprobs": token_lps, "top_logprobs": tops}}

    def _generate(self, ids: list[int], max_tokens: int, stop: list[str]) -> dict[str, Any]:
        out: list[int] = []
        text = ""
        for _ in range(max_tokens):
            nxt = int(self._logprobs(ids + out)[-1].argmax())
            if nxt == self.tok.eos_token_id:
                break
            out.append(nxt)
            text = self.tok.decode(out)
            cut = min((text.index(s) for s in stop if s in text), default=None)
            if cut is not None:
                return {"text": text[:cut], "finish_reason": "stop"}
        return {"text": text, "finish_reason": "length"}

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        prompts = body["prompt"]
        if isinstance(prompts, str) or (prompts and isinstance(prompts[0], int)):
            prompts = [prompts]
        choices = []
        with self.lock:
            for i, prompt in enumerate(prompts):
                ids = self._ids(prompt)
                if body.get("echo"):
                    choice = self._score(ids)
                else:
                    stop = body.get("stop") or []
                    choice = self._generate(ids, int(body.get("max_tokens", 16)), [stop] if isinstance(stop, str) else stop)
                choices.append({"index": i, **choice})
        return {"id": "cmpl-test", "object": "text_completion", "model": body.get("model"), "choices": choices}

    # ---------------------------------------------------------------- the HTTP side
    def __enter__(self) -> str:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests.append(body)
                if self.path.rstrip("/") != "/v1/completions":
                    self.send_error(404)
                    return
                payload = json.dumps(owner.complete(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1/completions"

    def __exit__(self, *exc) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
