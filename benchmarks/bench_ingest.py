"""Cold and warm `cr2 ingest` in a fresh warehouse (wall clock, one process each).

Cold: empty warehouse and empty tokenizer cache. Warm: the same command again with nothing changed
— the ingest task must be a cache hit (the summary says `cached`), so the time is Prefect's
temporary-server start plus the cache-key computation (file hashes). Each repeat starts from a new
empty installation. --quick ingests a 1k-query slice of the default set once.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from _common import CR2, figure, fresh_env, parse_args, run_measured, write_result, write_sliced_data


def main(argv=None) -> None:
    args = parse_args(__doc__, argv)
    repeats = args.repeats or (1 if args.quick else 3)
    cold, warm, cached, outputs, queries = [], [], [], [], None
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="cr2-bench-") as tmp:
            env = fresh_env(Path(tmp))
            cmd = [CR2, "ingest"]
            if args.quick:
                data, queries = write_sliced_data(Path(tmp) / "data", 1_000)
                (Path(tmp) / "bench.yaml").write_text(f"extends: default\ndata_dir: {data}\n")
                cmd += ["--config", str(Path(tmp) / "bench.yaml")]
            c = run_measured(cmd, env)
            w = run_measured(cmd, env)
        cold.append(c["wall_s"])
        warm.append(w["wall_s"])
        cached.append(100.0 * ("cached" in w["stdout"]))
        outputs.append(c["stdout"].strip().splitlines()[-12:])
    scope = f"{queries:,}-query slice" if queries else "default set"
    write_result("ingest", {
        "title": "`cr2 ingest`, cold and warm",
        "quick": args.quick,
        "config": {"repeats": repeats, "data": scope},
        "figures": [
            figure("cold_s", f"cold `cr2 ingest`, {scope}", cold, "s"),
            figure("warm_s", f"warm `cr2 ingest` (cache hit), {scope}", warm, "s"),
            figure("warm_cached_pct", "warm runs reported as cached", cached, "%"),
        ],
        "details": {"cold_output": outputs[0]},
    })


if __name__ == "__main__":
    main()
