"""Progress per second (speed x statistical efficiency) against workers, sync
and async, for two models on the ``default`` cluster's analytic model:

    python benchmarks/async_progress.py [--out docs/async-progress.png]

Each job is alone, consolidated (workers from GPU 0 on, one PS per socket the
workers span), each worker on the model's default batch (sync: global batch
= default x w; async: each worker's batch = default). Prints the figures it
plots."""

from __future__ import annotations

import argparse

import numpy as np

from hrlsched.config import resolve_run_config
from hrlsched.core.job import Job
from hrlsched.scenario import build_scenario

MODELS = ("resnet-50", "vgg-16")
WORKERS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64)


def curves(models: tuple[str, ...] = MODELS, workers: tuple[int, ...] = WORKERS) -> dict[tuple[str, str], np.ndarray]:
    perf = build_scenario(resolve_run_config("default").scenario, 0).perf
    out = {}
    for m in models:
        b = perf.catalogue[m].default_batch
        for mode in ("sync", "async"):
            rates = []
            for w in workers:
                pl = perf.compact_placement(w, len(set(perf.topology.gpu_socket[:w].tolist())))
                j = Job(0, 0.0, m, 1.0, b * w if mode == "sync" else b, w, pl.n_ps, "ps", mode)  # type: ignore[arg-type]
                eff = perf.efficiency([j], [pl], np.array([j.batch_size]), np.zeros(1))[0]
                rates.append(perf.alone_speed(j, pl) * eff)
            out[(m, mode)] = np.array(rates)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/async-progress.png")
    args = ap.parse_args()
    data = curves()
    print("progress per second (samples/s x efficiency), analytic model, default cluster")
    print(f"{'model':<10} {'mode':<5} " + " ".join(f"{w:>6}" for w in WORKERS))
    for (m, mode), r in data.items():
        print(f"{m:<10} {mode:<5} " + " ".join(f"{x:>6.0f}" for x in r))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(MODELS), figsize=(10, 3.8))
    for ax, m in zip(axes, MODELS):
        for mode, style in (("sync", "-o"), ("async", "--s")):
            ax.plot(WORKERS, data[(m, mode)], style, label=mode)
        ax.set_title(m)
        ax.set_xlabel("workers")
        ax.set_ylabel("progress / s (samples x efficiency)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    from hrlsched.io import atomic_write

    atomic_write(args.out, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
