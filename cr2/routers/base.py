"""The one-shot baseline rule and the machinery every baseline router shares (paper §VII-A).

All one-shot baselines (KNN, MLP, EmbedLLM, LLMRank) predict a correctness probability p̂_m(x) for every
model in the pool and route each query to

    m̂(x, ξ; λ) = argmax_{m ∈ M} p̂_m(x) − λ·c_m(x, ξ)        (ties → cheaper model, then lower index)

over the whole pool, device model included: there is no separate local-acceptance stage. The tie rule
is the full-information reference's (cr2.method.utility.full_information_choice), so a baseline fed the
teacher's probabilities makes exactly the reference's choices.

What lives here:
- `one_shot_choice`: the rule above, vectorised over queries;
- `OneShotRouter`: the scikit-learn-style base class (hyperparameters in __init__, learned state ending
  in `_`, NotFittedError before fit, fingerprint, save/load of learned state as one .npz file);
- `TorchOneShotRouter`: the shared training loop of the learned baselines (AdamW on BCE, checkpoint
  chosen on dev, early stopping). Its randomness comes from one torch.Generator created in fit; global
  torch RNG state is never seeded (modules are built inside torch.random.fork_rng, then re-initialised
  from the generator; dropout draws its masks from the generator too). torch is imported only inside
  the functions that need it, so the numpy-only routers (Always, KNN) never load it.
"""
from __future__ import annotations

import contextlib
import inspect
import json
import math
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from cr2.core.data import Decisions, RoutingSet
from cr2.core.files import atomic_write
from cr2.core.errors import DataValidationError, InvalidValueError, NotFittedError
from cr2.method.checkpoint import PREDICT_BATCH, fit_epochs
from cr2.core.hashing import content_fingerprint
from cr2.method.utility import DEVICE_INDEX, full_information_choice

META_KEY = "__meta__"  # the .npz entry that holds the JSON metadata (router, hyperparameters, pool)


def one_shot_choice(p_hat: np.ndarray, cost: np.ndarray, lam: float) -> np.ndarray:
    """Return argmax_m p̂_m(x) − λ·c_m(x, ξ) over the whole pool, int64 [n]; ties → cheaper, then lower index.

    p_hat, cost: [n, M]. Utilities are compared in float64 and a tie is exact equality (as in
    cr2.method.utility), so hand-built ties must be exactly representable (e.g. 0.75 − 1·0.25 = 0.5 − 0).
    """
    if np.ndim(lam) != 0:
        raise InvalidValueError(f"one_shot_choice takes one λ at a time, got {lam!r}")
    # eq. (teacher_utility) with p̂ in place of the teacher: û_m = p̂_m − λ c_m; m̂ = argmax over all of M
    return full_information_choice(p_hat, cost, float(lam)).astype(np.int64)


class OneShotRouter(ABC):
    """Base class of the one-shot baselines: predict p̂ [n, M], route by argmax p̂ − λ·c over the pool.

    Subclasses implement `_fit`, `predict_proba`, `n_params`, `flops_per_query`, `_state_arrays` and
    `_set_state`. `fit` validates the inputs, calls `_fit` and records the pool (`model_ids_`).
    """

    name: str = "one-shot"

    # ------------------------------------------------------------ scikit-learn conventions
    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values() if p.name != "self" and p.kind == p.POSITIONAL_OR_KEYWORD]

    def get_params(self) -> dict[str, Any]:
        """Return the constructor's hyperparameters (scikit-learn style)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # ------------------------------------------------------------ fitting
    def fit(self, train: RoutingSet, dev: RoutingSet) -> "OneShotRouter":
        """Return self, fitted on `train` (hyperparameters / checkpoint chosen on `dev`)."""
        _check_fit_inputs(type(self).__name__, train, dev)
        self._fit(train, dev)
        self.model_ids_ = tuple(train.model_ids)
        self.embed_dim_ = int(train.embedding.shape[1])
        return self

    @abstractmethod
    def _fit(self, train: RoutingSet, dev: RoutingSet) -> None:
        """Learn the router's state from validated inputs (sets attributes ending in `_`)."""

    def _is_fitted(self) -> bool:
        return hasattr(self, "model_ids_")

    def _check_fitted(self) -> None:
        if not self._is_fitted():
            raise NotFittedError(f"{type(self).__name__} '{self.name}' is not fitted; call fit(train, dev) before using it")

    def _check_batch(self, batch: RoutingSet) -> None:
        self._check_fitted()
        if tuple(batch.model_ids) != self.model_ids_:
            raise DataValidationError(
                f"router '{self.name}' was fitted on pool {self.model_ids_}, got a set over {tuple(batch.model_ids)}"
            )
        if batch.embedding.shape[1] != self.embed_dim_:
            raise DataValidationError(
                f"router '{self.name}' was fitted on {self.embed_dim_}-d embeddings, got {batch.embedding.shape[1]}-d"
            )

    # ------------------------------------------------------------ prediction
    @abstractmethod
    def predict_proba(self, batch: RoutingSet) -> np.ndarray:
        """Return p̂_m(x), float32 [n, M] in pool order."""

    def route(self, batch: RoutingSet, lam: float) -> Decisions:
        """Return the one-shot decisions argmax_m p̂_m − λ·c_m over the whole pool (accepted_local: m̂ = m0)."""
        p_hat = self.predict_proba(batch)
        chosen = one_shot_choice(p_hat, batch.decision_cost, lam)
        return Decisions(
            chosen=chosen,
            accepted_local=chosen == DEVICE_INDEX,
            extra={"p_hat": p_hat, "lam": float(lam), "router": self.name},
        )

    # ------------------------------------------------------------ complexity
    @abstractmethod
    def n_params(self) -> int:
        """Return the number of trainable parameters of the router head (encoder excluded)."""

    @abstractmethod
    def flops_per_query(self) -> int:
        """Return the FLOPs of one routing decision after the embedding (cr2.method.complexity convention)."""

    # ------------------------------------------------------------ learned state
    @abstractmethod
    def _state_arrays(self) -> dict[str, np.ndarray]:
        """Return the learned state as named numpy arrays (what fingerprint() hashes and save() writes)."""

    @abstractmethod
    def _set_state(self, arrays: dict[str, np.ndarray], extra: dict[str, Any]) -> None:
        """Restore the learned state written by save() (arrays and the JSON `extra`); model_ids_ and embed_dim_ are
        set already."""

    def _state_extra(self) -> dict[str, Any]:
        """Return JSON-serialisable learned scalars (e.g. the chosen k) stored beside the arrays."""
        return {}

    def fingerprint(self) -> str:
        """Return the content fingerprint of the learned state (cr2.core.hashing.content_fingerprint)."""
        self._check_fitted()
        return content_fingerprint(self.name, list(self.model_ids_), self._state_extra(), arrays=self._state_arrays())

    def save(self, path: str | Path) -> str:
        """Write hyperparameters and learned state to one .npz file at `path`; return the fingerprint."""
        self._check_fitted()
        arrays = self._state_arrays()
        if META_KEY in arrays:
            raise InvalidValueError(f"state array name {META_KEY!r} is reserved")
        meta = {
            "class": type(self).__name__,
            "name": self.name,
            "params": _jsonable(self.get_params()),
            "model_ids": list(self.model_ids_),
            "embed_dim": self.embed_dim_,
            "extra": self._state_extra(),
            "fingerprint": self.fingerprint(),
        }
        def write(tmp: Path) -> None:
            with open(tmp, "wb") as fh:
                np.savez(fh, **{META_KEY: np.array(json.dumps(meta))}, **arrays)

        atomic_write(path, write)  # a failed write leaves the previous file in place
        return meta["fingerprint"]

    @classmethod
    def load(cls, path: str | Path) -> "OneShotRouter":
        """Return the fitted router stored at `path` by save() (its fingerprint is verified)."""
        arrays, meta = read_router_file(path)
        if meta["class"] != cls.__name__:
            raise DataValidationError(f"{path}: holds a {meta['class']}, not a {cls.__name__}; load it with that class")
        router = cls(**meta["params"])
        router.model_ids_ = tuple(meta["model_ids"])  # set first: a composite router restores its parts with them
        router.embed_dim_ = int(meta["embed_dim"])
        router._set_state(arrays, meta["extra"])
        if router.fingerprint() != meta["fingerprint"]:
            raise DataValidationError(f"{path}: state does not match the stored fingerprint {meta['fingerprint']}; refit")
        return router


def part_state(router: OneShotRouter, prefix: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Return (arrays, extra) of a fitted router held inside another (a composite router's part): its state arrays
    named `<prefix>.<name>` and its JSON extra, for the composite's own _state_arrays / _state_extra."""
    return {f"{prefix}.{k}": v for k, v in router._state_arrays().items()}, router._state_extra()


def restore_part(cls: type, params: dict[str, Any], arrays: dict[str, np.ndarray], extra: dict[str, Any], prefix: str,
                 owner: OneShotRouter) -> Any:
    """Return the part router of class `cls` (constructed from `params`) restored from a composite's stored state:
    the arrays named `<prefix>.…` and the part's `extra`, on the pool and embedding width of `owner`."""
    router = cls(**params)
    router.model_ids_, router.embed_dim_ = tuple(owner.model_ids_), int(owner.embed_dim_)
    router._set_state({k[len(prefix) + 1 :]: v for k, v in arrays.items() if k.startswith(f"{prefix}.")}, extra)
    return router


def read_router_file(path: str | Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Return (arrays, metadata) of a router file written by OneShotRouter.save()."""
    try:
        with np.load(Path(path), allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except FileNotFoundError:
        raise DataValidationError(f"{path}: router file not found; fit and save the router first") from None
    if META_KEY not in arrays:
        raise DataValidationError(f"{path}: not a cr2 router file (no {META_KEY} entry)")
    meta = json.loads(str(arrays.pop(META_KEY)))
    return arrays, meta


def _jsonable(params: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in params.items():
        out[key] = list(value) if isinstance(value, tuple) else value
    json.dumps(out)  # fail here, naming nothing exotic, rather than inside np.savez
    return out


def _check_fit_inputs(owner: str, train: RoutingSet, dev: RoutingSet) -> None:
    if len(train) == 0 or len(dev) == 0:
        raise DataValidationError(f"{owner}.fit needs non-empty train and dev sets (got {len(train)} and {len(dev)} rows)")
    if tuple(train.model_ids) != tuple(dev.model_ids):
        raise DataValidationError(f"train and dev pools differ: {train.model_ids} vs {dev.model_ids}")
    if train.embedding.shape[1] != dev.embedding.shape[1]:
        raise DataValidationError(
            f"train and dev embeddings differ in width: {train.embedding.shape[1]} vs {dev.embedding.shape[1]}"
        )


def l2_normalise(embedding: np.ndarray) -> np.ndarray:
    """Return the rows of `embedding` scaled to unit L2 norm, float32 (zero rows stay zero)."""
    arr = np.asarray(embedding, dtype=np.float32)
    norm = np.linalg.norm(arr, axis=1, keepdims=True)
    return arr / np.where(norm > 0, norm, 1.0).astype(np.float32)


# ============================================================ torch helpers (torch imported lazily)
@contextlib.contextmanager
def torch_threads(num_threads: int) -> Iterator[None]:
    """Run the block with torch's intra-op thread count fixed at `num_threads`; restore it afterwards."""
    import torch

    prev = torch.get_num_threads()
    torch.set_num_threads(int(num_threads))
    try:
        yield
    finally:
        torch.set_num_threads(prev)


def gen_dropout(x: Any, p: float, generator: Any, training: bool) -> Any:
    """Return inverted dropout of `x` with masks drawn from `generator` (identity in eval mode or p = 0)."""
    if not training or p <= 0.0:
        return x
    import torch

    keep = torch.rand(x.shape, generator=generator, dtype=x.dtype) >= p
    return x * keep / (1.0 - p)


def build_module(factory: Any) -> Any:
    """Return factory() built without leaving a trace on the global torch RNG (its init is redone by init_parameters_)."""
    import torch

    with torch.random.fork_rng(devices=[]):
        return factory()


def init_parameters_(module: Any, generator: Any) -> None:
    """Re-initialise every Linear (torch's default Kaiming-uniform scheme) and Embedding (N(0, 1)) from `generator`."""
    import torch
    from torch import nn

    with torch.no_grad():
        for sub in module.modules():
            if isinstance(sub, nn.Linear):
                nn.init.kaiming_uniform_(sub.weight, a=math.sqrt(5), generator=generator)
                if sub.bias is not None:
                    bound = 1.0 / math.sqrt(sub.weight.shape[1]) if sub.weight.shape[1] > 0 else 0.0
                    nn.init.uniform_(sub.bias, -bound, bound, generator=generator)
            elif isinstance(sub, nn.Embedding):
                nn.init.normal_(sub.weight, 0.0, 1.0, generator=generator)


class TorchOneShotRouter(OneShotRouter):
    """A one-shot router whose p̂ is σ of a torch network's per-model correctness logits, [n, M].

    Training (shared by MLP, EmbedLLM and LLMRank): AdamW on the mean BCE between the logits and y_m(x)
    (plus whatever `_batch_loss` adds), mini-batches reshuffled each epoch from the fit's generator,
    gradient clipping, and the checkpoint of lowest dev BCE (earliest epoch on ties); training stops
    after `patience` epochs without improvement. Subclasses set the hyperparameter attributes used here
    (epochs, batch_size, lr, weight_decay, grad_clip, patience, seed, num_threads) and implement
    `_build_net`, `_inputs` and the complexity counts.
    """

    # ------------------------------------------------------------ hooks
    @abstractmethod
    def _build_net(self, n_models: int, embed_dim: int) -> Any:
        """Return the (un-initialised) torch module; forward(*inputs) → logits [B, M]."""

    @abstractmethod
    def _inputs(self, data: RoutingSet) -> tuple[Any, ...]:
        """Return the network inputs for a (validated) set as float32 tensors with n rows."""

    def _prepare_fit(self, train: RoutingSet, dev: RoutingSet) -> None:
        """Fit any non-network state before the network (LLMRank's feature extractor)."""

    def _train_inputs(self, train: RoutingSet) -> tuple[Any, ...]:
        """Return the inputs of the training rows (LLMRank uses leave-one-out priors here)."""
        return self._inputs(train)

    def _augment(self, inputs: tuple[Any, ...], generator: Any) -> tuple[Any, ...]:
        """Return the training inputs of one mini-batch after data augmentation (EmbedLLM adds noise)."""
        return inputs

    def _batch_loss(self, logits: Any, correct: Any) -> Any:
        """Return the training loss of one mini-batch: mean BCE between logits and y_m(x)."""
        from torch.nn import functional as F

        return F.binary_cross_entropy_with_logits(logits, correct)

    # ------------------------------------------------------------ training
    def _fit(self, train: RoutingSet, dev: RoutingSet) -> None:
        import torch

        with torch_threads(self.num_threads):
            gen = torch.Generator().manual_seed(int(self.seed))
            self._prepare_fit(train, dev)
            x_train = self._train_inputs(train)
            y_train = torch.from_numpy(np.asarray(train.correct, dtype=np.float32))
            x_dev = self._inputs(dev)
            y_dev = torch.from_numpy(np.asarray(dev.correct, dtype=np.float32))

            embed_dim = int(train.embedding.shape[1])
            net = build_module(lambda: self._build_net(train.n_models, embed_dim))
            init_parameters_(net, gen)
            self._train_net(net, x_train, y_train, x_dev, y_dev, int(self.epochs), gen)
        self._set_net(net)

    def _train_net(self, net: Any, x_train: tuple[Any, ...], y_train: Any, x_dev: tuple[Any, ...], y_dev: Any,
                   epochs: int, gen: Any) -> None:
        """The training loop of every torch baseline: AdamW on `_batch_loss`, the checkpoint of lowest dev BCE."""
        import torch

        net.dropout_generator = gen
        opt = torch.optim.AdamW(net.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        n = len(y_train)

        def batches() -> Iterator[Any]:
            perm = torch.randperm(n, generator=gen)
            for start in range(0, n, int(self.batch_size)):
                idx = perm[start : start + int(self.batch_size)]
                yield self._batch_loss(net(*self._augment(tuple(x[idx] for x in x_train), gen)), y_train[idx])

        fit_epochs(net, opt, epochs, batches, lambda: _mean_bce(net, x_dev, y_dev), self.grad_clip,
                   patience=int(self.patience), dev_name="dev_bce")
        net.dropout_generator = None

    def fine_tune(self, train: RoutingSet, dev: RoutingSet, epochs: int) -> "TorchOneShotRouter":
        """Return self after `epochs` more epochs on (train, dev) from its fitted network (e.g. on new costs).

        The non-network state (MLP's cost columns, LLMRank's features) stays as fitted; the checkpoint of lowest
        dev BCE over these epochs is kept, as in fit.
        """
        import torch

        self._check_fitted()
        _check_fit_inputs(type(self).__name__, train, dev)
        with torch_threads(self.num_threads):
            gen = torch.Generator().manual_seed(int(self.seed) + 1)
            y_train = torch.from_numpy(np.asarray(train.correct, dtype=np.float32))
            y_dev = torch.from_numpy(np.asarray(dev.correct, dtype=np.float32))
            self.net_.requires_grad_(True)  # a fitted (or loaded) network is frozen
            self._train_net(self.net_, self._train_inputs(train), y_train, self._inputs(dev), y_dev, int(epochs), gen)
        self._set_net(self.net_)
        return self

    def _set_net(self, net: Any) -> None:
        self.net_ = net
        self.history_ = net.history_
        self.best_epoch_ = net.best_epoch_
        self.dev_bce_ = net.best_dev_loss_

    # ------------------------------------------------------------ prediction
    def predict_proba(self, batch: RoutingSet) -> np.ndarray:
        """Return p̂_m(x) = σ(logit_m(x)), float32 [n, M] (eval mode, batched)."""
        import torch

        self._check_batch(batch)
        with torch_threads(self.num_threads), torch.no_grad():
            inputs = self._inputs(batch)
            n = len(batch)
            out = [torch.sigmoid(self.net_(*(x[i : i + PREDICT_BATCH] for x in inputs))) for i in range(0, n, PREDICT_BATCH)]
        if not out:
            return np.zeros((0, len(self.model_ids_)), dtype=np.float32)
        return torch.cat(out).numpy().astype(np.float32, copy=False)

    def n_params(self) -> int:
        """Return the number of trainable parameters of the fitted network."""
        from cr2.method.complexity import count_parameters

        self._check_fitted()
        return count_parameters(self.net_)

    # ------------------------------------------------------------ learned state
    def _state_arrays(self) -> dict[str, np.ndarray]:
        return {f"net.{k}": v.detach().cpu().numpy() for k, v in self.net_.state_dict().items()}

    def _set_state(self, arrays: dict[str, np.ndarray], extra: dict[str, Any]) -> None:
        import torch

        n_models, embed_dim = int(extra["n_models"]), int(extra["embed_dim"])
        net = build_module(lambda: self._build_net(n_models, embed_dim))
        state = {k[len("net.") :]: torch.from_numpy(np.array(v)) for k, v in arrays.items() if k.startswith("net.")}
        net.load_state_dict(state)
        net.dropout_generator = None
        net.eval().requires_grad_(False)
        self.net_ = net

    def _state_extra(self) -> dict[str, Any]:
        return {"n_models": len(self.model_ids_), "embed_dim": self.embed_dim_}


def _mean_bce(net: Any, inputs: tuple[Any, ...], correct: Any) -> float:
    """Return the mean BCE of the network's logits against y over a whole set (eval mode, batched)."""
    import torch
    from torch.nn import functional as F

    net.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(correct), PREDICT_BATCH):
            logits = net(*(x[i : i + PREDICT_BATCH] for x in inputs))
            y = correct[i : i + PREDICT_BATCH]
            total += float(F.binary_cross_entropy_with_logits(logits, y, reduction="sum"))
            count += y.numel()
    return total / max(count, 1)


def embedding_tensor(data: RoutingSet) -> Any:
    """Return the set's embeddings as a contiguous float32 tensor [n, d]."""
    import torch

    return torch.from_numpy(np.ascontiguousarray(np.asarray(data.embedding, dtype=np.float32)))
