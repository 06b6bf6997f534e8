"""``hrlsched trace``: statistics of a trace, conversion to hrlsched's generic
CSV, a calibrated synthetic generator, and the fit of its size profiles."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.table import Table

FORMAT_HELP = "trace format: itp, pollux, philly, alibaba, tiresias, gavel, generic"
CLUSTER_HELP = ("cluster: SERVERSxGPUS (e.g. 16x4), a built-in scenario name, a cluster or scenario YAML, "
                "or an Alibaba node-list CSV")

err = Console(stderr=True)


def _fail(msg: str) -> None:
    err.print(f"[red]error:[/red] {msg}", highlight=False)
    raise typer.Exit(2)


def cluster_gpus(spec: str) -> int:
    """GPU count of a ``--cluster`` value (see CLUSTER_HELP)."""
    from hrlsched.cluster.spec import ClusterSpec
    from hrlsched.config import builtin_scenarios, load_yaml
    from hrlsched.schema import SchemaError

    if "x" in spec and all(p.isdigit() for p in spec.split("x", 1)):
        servers, per = (int(p) for p in spec.split("x", 1))
        if servers < 1 or per < 1:
            raise ValueError(f"--cluster {spec!r}: expected SERVERSxGPUS with both >= 1")
        return servers * per
    if spec in builtin_scenarios():
        cl = load_yaml(builtin_scenarios()[spec])["cluster"]
        return _count(ClusterSpec.validate(cl))
    path = Path(spec)
    if not path.exists():
        raise ValueError(f"--cluster {spec!r}: expected {CLUSTER_HELP}")
    if path.suffix == ".csv":
        from hrlsched.workload.loaders.alibaba import cluster_spec

        return _count(cluster_spec(path))
    data = load_yaml(path)
    data = data.get("scenario", data)
    try:
        return _count(ClusterSpec.validate(data.get("cluster", data)))
    except SchemaError as e:  # each wrong field named by its place in that file
        lines = e.lines("cluster" if "cluster" in data else "")
        raise ValueError("\n  ".join([f"{path}: invalid cluster", *lines])) from None


def _count(spec: Any) -> int:
    return sum(g.count * g.gpus_per_server for g in spec.server_groups)


def _load(path: Path, fmt: str, throughputs: Path | None) -> list:
    from hrlsched.workload.loaders import load_trace

    opts = {"throughputs": throughputs} if fmt == "gavel" and throughputs else {}
    return load_trace(path, fmt, **opts)


def print_stats(st: dict[str, Any], title: str) -> None:
    t = Table(title=title)
    t.add_column("statistic")
    t.add_column("value", justify="right")
    for k, v in st.items():
        if isinstance(v, dict):
            v = ", ".join(f"{a}: {b}" for a, b in v.items())
        t.add_row(k, str(v))
    Console(width=140).print(t)


def register(app: typer.Typer) -> None:
    trace_app = typer.Typer(no_args_is_help=True, help="Trace statistics, conversion and generation.")
    app.add_typer(trace_app, name="trace")

    @trace_app.command("stats")
    def stats(
        paths: Annotated[list[Path], typer.Argument(help="trace file(s); several are pooled")],
        format: Annotated[str, typer.Option("--format", help=FORMAT_HELP)],
        cluster: Annotated[Optional[str], typer.Option(help=CLUSTER_HELP)] = None,  # noqa: UP045
        throughputs: Annotated[Optional[Path], typer.Option(help="gavel: simulation_throughputs.json")] = None,  # noqa: UP045
        window_start_s: Annotated[float, typer.Option(help="keep arrivals from this trace time")] = 0.0,
        window_h: Annotated[Optional[float], typer.Option(help="keep arrivals within this many hours")] = None,  # noqa: UP045
        json_out: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
    ) -> None:
        """Jobs, GPU-count histogram, duration percentiles, inter-arrival CV,
        GPU time and (with --cluster) offered load, over the whole trace or a
        window of it (as a scenario's workload.window_start_s / window_h)."""
        from hrlsched.workload.trace import trace_stats

        try:
            gpus = cluster_gpus(cluster) if cluster else None
            records = [r for p in paths for r in _load(p, format, throughputs)]
        except (OSError, ValueError) as e:
            _fail(str(e))
        if len(paths) > 1:  # pooled files keep their own clocks: the CV is that of the merged stream
            records.sort(key=lambda r: r.arrival_s)
        horizon = None
        if window_start_s > 0 or window_h is not None:
            end = window_start_s + window_h * 3600.0 if window_h is not None else float("inf")
            records = [r for r in records if window_start_s <= r.arrival_s < end]
            horizon = window_h * 3600.0 if window_h is not None else None
        st = trace_stats(records, gpus, horizon)
        if json_out:
            print(json.dumps({"files": [str(p) for p in paths], "format": format, **st}, indent=2))
            return
        print_stats(st, f"{', '.join(str(p) for p in paths)} ({format})")

    @trace_app.command("convert")
    def convert(
        path: Annotated[Path, typer.Argument(help="trace file")],
        format: Annotated[str, typer.Option("--format", help=FORMAT_HELP)],
        out: Annotated[Path, typer.Option(help="generic CSV to write")],
        throughputs: Annotated[Optional[Path], typer.Option(help="gavel: simulation_throughputs.json")] = None,  # noqa: UP045
    ) -> None:
        """Write a trace in hrlsched's generic CSV (docs/traces.md)."""
        from hrlsched.workload.loaders import generic

        try:
            records = _load(path, format, throughputs)
        except (OSError, ValueError) as e:
            _fail(str(e))
        generic.dump(records, out)
        err.print(f"wrote {out} ({len(records)} jobs)")

    @trace_app.command("generate")
    def generate(
        out: Annotated[Path, typer.Option(help="generic CSV to write")],
        jobs: Annotated[int, typer.Option(help="number of jobs")] = 500,
        sizes: Annotated[str, typer.Option(help="fitted size profile: itp or philly")] = "itp",
        arrivals: Annotated[str, typer.Option(help="poisson, diurnal, bursty or replay")] = "poisson",
        cluster: Annotated[Optional[str], typer.Option(help=CLUSTER_HELP + " (needed by --load)")] = None,  # noqa: UP045
        load: Annotated[Optional[float], typer.Option(help="target offered load on --cluster")] = None,  # noqa: UP045
        duration_h: Annotated[Optional[float], typer.Option(help="arrival window without --load")] = None,  # noqa: UP045
        target_cv: Annotated[float, typer.Option(help="bursty: inter-arrival CV")] = 5.0,
        diurnal_ratio: Annotated[float, typer.Option(help="diurnal: peak/trough rate")] = 9.0,
        weekend_factor: Annotated[float, typer.Option(help="diurnal: weekend/weekday rate")] = 0.6,
        replay: Annotated[Optional[Path], typer.Option(help="replay: trace whose gaps are replayed")] = None,  # noqa: UP045
        replay_format: Annotated[str, typer.Option(help="replay: its format")] = "itp",
        seed: Annotated[int, typer.Option(help="random seed")] = 0,
    ) -> None:
        """Generate a synthetic workload calibrated on a real trace."""
        import numpy as np

        from hrlsched.workload.generator import PROFILES, generate_records
        from hrlsched.workload.loaders import generic
        from hrlsched.workload.trace import trace_stats

        if sizes not in PROFILES:
            _fail(f"--sizes {sizes!r}: expected one of {', '.join(PROFILES)}")
        kw: dict[str, Any] = {}
        if arrivals == "bursty":
            kw = {"target_cv": target_cv}
        elif arrivals == "diurnal":
            kw = {"diurnal_ratio": diurnal_ratio, "weekend_factor": weekend_factor}
        elif arrivals == "replay":
            if replay is None:
                _fail("--arrivals replay needs --replay TRACE")
        try:
            if arrivals == "replay":
                kw = {"replay_arrivals": np.array([r.arrival_s for r in _load(replay, replay_format, None)])}  # type: ignore[arg-type]
            gpus = cluster_gpus(cluster) if cluster else None
            if load is None and duration_h is None:
                raise ValueError("give --load (with --cluster) or --duration-h")
            records = generate_records(jobs, PROFILES[sizes], np.random.default_rng(seed), arrivals=arrivals,
                                       cluster_gpus=gpus, load=load, duration_h=duration_h, **kw)
        except (OSError, ValueError) as e:
            _fail(str(e))
        generic.dump(records, out)
        st = trace_stats(records, gpus)
        err.print(f"wrote {out} ({len(records)} jobs, arrivals over {st.get('arrival_span_h')} h, "
                  f"inter-arrival CV {st.get('interarrival_cv')}"
                  + (f", offered load {st.get('offered_load')}" if gpus else "") + ")")

    @trace_app.command("fit")
    def fit(
        paths: Annotated[list[Path], typer.Argument(help="trace file(s); several are pooled")],
        format: Annotated[str, typer.Option("--format", help=FORMAT_HELP)],
        name: Annotated[str, typer.Option(help="profile name")] = "custom",
        throughputs: Annotated[Optional[Path], typer.Option(help="gavel: simulation_throughputs.json")] = None,  # noqa: UP045
    ) -> None:
        """Fit a size profile (GPU counts, per-class duration quantiles) and
        print it as the Python constant that workload/generator.py embeds."""
        from hrlsched.workload.generator import fit_profile, profile_literal

        try:
            records = [r for p in paths for r in _load(p, format, throughputs)]
            src = f"hrlsched trace fit {' '.join(str(p) for p in paths)} --format {format} --name {name}"
            print(profile_literal(fit_profile(records, name, src)))
        except (OSError, ValueError) as e:
            _fail(str(e))
