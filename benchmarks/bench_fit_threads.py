"""One gate fit at 1 and at 2 torch threads, and two 1-thread fits side by side: what `fit.torch_threads` trades.

The margin gate is fitted on synthetic routing sets the size of the default train/dev split (15,504 / 1,695 rows,
4 models), a few epochs, at 1 thread and at 2 threads (the same process, alternating, `repeats` times each); then
two 1-thread fits in two processes at once (cr2.routers.fitting.run_fits), which is what the default does with the second
core. Writes benchmarks/results/fit_threads.json. Take it on an idle machine: a busy core slows a 2-thread fit
far more than a 1-thread one, and that is part of what it shows, not something to average over.
    .venv/bin/python benchmarks/bench_fit_threads.py [--epochs 3] [--repeats 3]
"""
from __future__ import annotations

import sys
import time

from _common import figure, fmt, parse_args, write_result


def _fit(threads: int, epochs: int, seed: int = 0) -> float:
    """Seconds of one gate fit at `threads` torch threads (module level: run in spawned processes too)."""
    from cr2.config import GateSpec
    from cr2.method.gate import fit_gate
    from cr2.evaluation.synthetic import make_routing_set

    train, dev = make_routing_set(15504, seed=1), make_routing_set(1695, seed=2)
    rng = __import__("numpy").random.default_rng(seed)
    p_train, p_dev = rng.uniform(size=train.cost.shape), rng.uniform(size=dev.cost.shape)
    t0 = time.perf_counter()
    fit_gate(train, dev, p_train, p_dev, GateSpec(epochs=epochs), num_threads=threads)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__, argv, epochs={"type": int, "default": 3, "help": "gate epochs per fit (default 3)"})
    from cr2.routers.fitting import available_cores, run_fits

    reps = args.repeats or (1 if args.quick else 3)
    epochs = 1 if args.quick else args.epochs
    with open("/proc/loadavg") as f:
        load_before = f.read().split()[:3]
    one, two, pair = [], [], []
    for _ in range(reps):
        one.append(_fit(1, epochs))
        two.append(_fit(2, epochs))
        t0 = time.perf_counter()
        run_fits(_fit, [(1, epochs), (1, epochs)], workers=2)
        pair.append(time.perf_counter() - t0)
    with open("/proc/loadavg") as f:
        load_after = f.read().split()[:3]
    figures = [figure("gate_fit_1_thread_s", f"gate fit, {epochs} epochs, 1 torch thread", one, "s"),
               figure("gate_fit_2_threads_s", f"gate fit, {epochs} epochs, 2 torch threads", two, "s"),
               figure("two_fits_in_parallel_s", f"two 1-thread gate fits in 2 processes at once, {epochs} epochs",
                      pair, "s")]
    speedup = sorted(one)[len(one) // 2] / sorted(two)[len(two) // 2]
    print(f"2 threads ÷ 1 thread speed-up of one fit: {fmt(speedup)}×", flush=True)
    write_result("fit_threads", {"title": "`fit.torch_threads`: one gate fit at 1 and 2 threads, two fits at once",
                                 "quick": args.quick, "config": {"epochs": epochs, "repeats": reps,
                                                                 "cores": available_cores()},
                                 "load_avg_before": load_before, "load_avg_after": load_after,
                                 "speedup_two_threads": speedup, "figures": figures})
    return 0


if __name__ == "__main__":
    sys.exit(main())
