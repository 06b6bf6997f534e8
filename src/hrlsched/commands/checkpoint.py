"""``hrlsched checkpoint show PATH``: what a checkpoint holds, without a
Python session: its kind, provenance, training config, environment
settings, the hint and rule weights (``HintConfig``) of an hrl agent, its
network and its feature schema. ``hrlsched checkpoint list``: the shipped
checkpoints, by the name that ``--checkpoint`` takes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

PROVENANCE = ("kind", "format", "part", "iteration", "env_steps", "elapsed_s", "best_jct_s", "bc_done",
              "exported_from", "ablated_from", "ablation")


def _text(v: Any) -> str:
    return json.dumps(v, default=str) if isinstance(v, (dict, list, tuple)) else str(v)


def describe(ck: dict[str, Any]) -> dict[str, Any]:
    """The parts of a loaded checkpoint that ``show`` prints (JSON-ready)."""
    out: dict[str, Any] = {"provenance": {k: ck[k] for k in PROVENANCE if k in ck}}
    if "env_kwargs" in ck:
        out["env_kwargs"] = ck["env_kwargs"]
    if "config" in ck:
        out["config"] = ck["config"]
    if "tune" in ck:
        out["tune"] = {k: v for k, v in ck["tune"].items() if k != "config"}
    # the training configs of the checkpoints it started from (train-es --init), the nearest first:
    # the path its own config names as --init may hold another file since
    chain, rec = [], ck.get("init")
    while isinstance(rec, dict) and isinstance(rec.get("config"), dict):
        chain.append(rec["config"])
        rec = rec.get("init")
    if chain:
        out["started_from"] = chain
    if isinstance(ck.get("net"), dict):
        out["net"] = ck["net"]
    if isinstance(ck.get("residual"), dict):  # the learned residual over the rules (agent.residual)
        out["residual"] = dict(zip(ck["residual"].get("features", []), ck["residual"].get("weights", [])))
    if isinstance(ck.get("selector"), dict):  # the learned point selector (agent.selector): a row per heuristic
        sel = ck["selector"]
        out["selector"] = {p: dict(zip(sel.get("features", []), row))
                           for p, row in zip(sel.get("policies", []), sel.get("weights", []))}
    if isinstance(ck.get("placement"), dict):  # the learned placement choice (agent.placement_choice)
        out["placement"] = dict(zip(ck["placement"].get("features", []), ck["placement"].get("weights", [])))
    if "es_held_back_gain_pct" in ck:
        out["provenance"]["es_held_back_gain_pct"] = ck["es_held_back_gain_pct"]
    if "state_dict" in ck:
        out["parameters"] = int(sum(getattr(v, "numel", lambda: 0)() for v in ck["state_dict"].values()))
    schema = ck.get("schema") or ck.get("feature_schema")
    if isinstance(schema, dict):
        out["schema"] = {k: list(v) for k, v in schema.items()}
    return out


#: what an hrl checkpoint may carry that it learned, as ``list`` names it
LEARNED_PARTS = (("selector", "point selector"), ("residual", "residual"), ("placement", "placement choice"))


def summary(ck: dict[str, Any]) -> dict[str, str]:
    """One line of ``list``: a loaded checkpoint's kind, what it learned, how its rules place and what it was
    trained on."""
    kind = ck.get("kind") or "hrl"
    cfg = ck.get("config") if isinstance(ck.get("config"), dict) else {}
    if kind == "hrl":
        learned = [name for key, name in LEARNED_PARTS if isinstance(ck.get(key), dict)]
        placement = str(ck.get("env_kwargs", {}).get("placement", ""))
        trained = cfg.get("cases") or ([cfg["scenario"]] if "scenario" in cfg else [])
    else:
        learned, placement = ["network"], ""
        trained = [cfg["scenario"]] if "scenario" in cfg else []
    return {"kind": kind, "learned": ", ".join(learned) or "nothing (its rules)", "rules placed by": placement,
            "trained on": ", ".join(map(str, trained))}


def register(app: typer.Typer) -> None:
    group = typer.Typer(add_completion=False, no_args_is_help=True, help="Inspect checkpoints.")
    app.add_typer(group, name="checkpoint")

    @group.command("rules-only")
    def rules_only_cmd(
        src: Annotated[Path, typer.Argument(help="an hrl checkpoint with a hint, a file or a shipped one's name (e.g. hrl-default)")],
        dst: Annotated[Path, typer.Argument(help="the file to write (written whole, via a temporary file)")],
    ) -> None:
        """Write SRC with everything it learned removed: the rules-only ablation
        of `hrlsched evaluate` as a checkpoint, to train other learned parts on
        the bare rules (train-es --init DST)."""
        from hrlsched.agent.checkpoint import load
        from hrlsched.agent.common.checkpoint import save
        from hrlsched.errors import CheckpointError
        from hrlsched.experiments.ablation import AblationError, rules_only

        err = Console(stderr=True, soft_wrap=True)
        try:
            ck = rules_only(load(src), str(src))
        except (CheckpointError, AblationError) as e:
            err.print(f"[red]error:[/red] {e}", highlight=False)
            raise typer.Exit(2) from None
        ck.pop("ablation", None)  # a checkpoint of its own now, not a row of an evaluation
        save(dst, ck)
        err.print(f"wrote {dst}: {src}'s rules, nothing learned")

    @group.command("list")
    def list_cmd(json_out: Annotated[bool, typer.Option("--json", help="print JSON")] = False) -> None:
        """The checkpoints shipped in the package: their names (what --checkpoint takes, e.g.
        --checkpoint hrl-hetero), the policy each is the default of (--policy hrl, dl2,
        harmony), what it learned, how its rules place and its training cases."""
        from hrlsched.agent.common.checkpoint import read
        from hrlsched.agent.common.shipped import shipped_names
        from hrlsched.experiments.learned import shipped_checkpoint

        default_of = {shipped_checkpoint(p).resolve(): p for p in ("hrl", "dl2", "harmony")}
        rows = {name: {**summary(read(path)), "default of": default_of.get(path.resolve(), ""), "file": str(path)}
                for name, path in shipped_names().items()}
        if json_out:
            print(json.dumps(rows, indent=2))
            return
        t = Table(title="shipped checkpoints (--policy KIND --checkpoint NAME; hrlsched checkpoint show NAME)",
                  title_justify="left")
        cols = ("kind", "default of", "learned", "rules placed by", "trained on")
        t.add_column("name")
        for c in cols:
            t.add_column(c)
        for name, r in rows.items():
            t.add_row(name, *(r[c] for c in cols))
        Console(width=160).print(t)

    @group.command()
    def show(
        path: Annotated[Path, typer.Argument(help="a checkpoint (hrl, dl2 or harmony): a file, or a "
                                                  "shipped one's name (hrlsched checkpoint list), e.g. hrl-default")],
        json_out: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
        schema: Annotated[bool, typer.Option(help="list every feature of the schema (default: counts)")] = False,
    ) -> None:
        """A checkpoint's provenance, config, hint settings and schema."""
        from hrlsched.agent.common.checkpoint import HRL, read
        from hrlsched.agent.common.shipped import checkpoint_path
        from hrlsched.errors import CheckpointError

        err = Console(stderr=True, soft_wrap=True)  # (a path is never wrapped)
        try:
            ck = read(path)
            info = describe(ck)
            hint = None
            if (ck.get("kind") or HRL) == HRL and ck.get("part") != "place" and "env_kwargs" in ck:
                from hrlsched.agent.checkpoint import hint_of

                hint = hint_of(ck)
        except CheckpointError as e:
            err.print(f"[red]error:[/red] {e}", highlight=False)
            raise typer.Exit(2) from None
        if hint is not None:
            info["hint"] = {"text": hint.text(), **{name: value for name, _, value, _, _ in hint.rows()}}
        if json_out:
            print(json.dumps(info, indent=2, default=str))
            return
        con = Console(width=140)
        con.print(f"[bold]{checkpoint_path(path)}[/bold]")
        for title, key in (("provenance", "provenance"), ("environment (env_kwargs)", "env_kwargs"),
                           ("search that chose it (hrlsched tune)", "tune"), ("network", "net"),
                           ("learned residual over the rules (agent.residual): weight per feature", "residual"),
                           ("learned point selector (agent.selector): weights per heuristic", "selector"),
                           ("learned placement choice (agent.placement_choice): weight per feature", "placement")):
            if key in info:
                t = Table(title=title, title_justify="left", show_header=False)
                for k, v in info[key].items():
                    t.add_row(k, _text(v))
                con.print(t)
        if hint is not None:
            t = Table(title=f"hint (policies.hint.HintConfig): {hint.text() or 'the paper’s defaults'}",
                      title_justify="left")
            for c in ("setting", "short", "value", "default", "what it is"):
                t.add_column(c)
            for row in hint.rows():
                t.add_row(*row)
            con.print(t)
        if "config" in info:
            t = Table(title="training config", title_justify="left", show_header=False)
            for k, v in info["config"].items():
                t.add_row(k, _text(v))
            con.print(t)
        for i, c in enumerate(info.get("started_from", []), 1):
            t = Table(title=f"started from (--init): that checkpoint's training config{f', {i} steps back' if i > 1 else ''}",
                      title_justify="left", show_header=False)
            for k, v in c.items():
                t.add_row(k, _text(v))
            con.print(t)
        if "parameters" in info:
            con.print(f"parameters: {info['parameters']:,}")
        if "schema" in info:
            t = Table(title="feature schema", title_justify="left", show_header=False)
            for k, v in info["schema"].items():
                t.add_row(k, ", ".join(v) if schema else f"{len(v)} features")
            con.print(t)
