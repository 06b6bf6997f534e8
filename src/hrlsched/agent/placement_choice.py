"""The agent's level 2: one placement per job chosen among candidate
placements, by a linear score of a few named features of each.

Why candidates and not GPU by GPU: a heuristic's placement then stays
exactly reachable (the GPU-by-GPU clone of ``pack`` matched it at 83% of
the choices and lost 4%, issue 34), and the choice is one argmax over a
handful of whole placements that the performance model prices in about a
millisecond each.

When a job is placed anew at an allocation choice (``DecisionPoint.
place_choice``), its candidates are (``CANDIDATE_SOURCES``), deduplicated:

- ``pack``: the heuristic's own placement (the agent's masks stay pack's,
  and every candidate exists where pack's does);
- ``balance``: the least-loaded servers first;
- ``topology``: its candidate set (pack's, balance's, and consolidated on
  each of the 3 roomiest servers), so ``topology``'s choice is among them
  (it scores them with the performance model on the view's running jobs);
- ``quiet``: for a job no single server can take, the servers whose NICs
  the jobs decided so far cross least, the roomiest first among equals.

Each candidate's features (``PLACEMENT_FEATURES``), relative to pack's
(pack's are 0):

- ``servers``: servers it spans;
- ``suffered``: the job's own predicted slowdown among its neighbours, 1 -
  its speed there over its best speed alone at any candidate, in tenths;
- ``caused``: the speed its neighbours lose, the sum of 1 - their speed
  with it over their speed without it, in tenths; the neighbours are the
  jobs on the servers any candidate touches: those placed at this point
  and the running jobs not decided yet, where they run (the performance
  model of the view, ``speeds_beside``: the candidates that share nothing
  with them cause nothing and suffer only their speed alone);
- ``link_load``: the mean number of jobs decided so far on the shared links
  it crosses (switch uplinks, QPI, NICs, rack uplinks; 0 if none);
- ``fragments``: servers left partly used (some GPUs free, some not) after
  it;
- ``balance``: 1 for balance's placement.

Score: ``weights . features`` plus ``PRIOR`` (1) on pack's candidate; the
best score wins, pack's among ties. With all weights 0 pack's always wins:
the agent's placement is pack's, to the bit (no feature is computed then).

At most ``PRICED_PER_POINT`` (16) jobs are chosen for at one decision point,
the first ones placed; the others there take pack's placement unpriced
(``capped`` counts them). Why: each choice costs about a millisecond, so a
point that places hundreds of jobs anew (500 arrivals at once) would cost
about half a second or more (issue 34's target 6: 100 ms at 1,024 GPUs and
500 jobs). It changes no decision of any evaluation page: run with the cap
lifted, no job beyond the 16th of its point departs from pack there
(``benchmarks/placement_cap.py``; docs/performance.md gives the counts).

A checkpoint carries the weights as ``placement = {"features": [...],
"weights": [...]}``; ``hrlsched train-es --learn placement`` learns them
(``agent.es``)."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import numpy as np

from hrlsched.core.job import Job
from hrlsched.core.placement import Placement
from hrlsched.envs.board import crossed_links
from hrlsched.errors import CheckpointError
from hrlsched.policies.placement.balance import BalancePlacement
from hrlsched.policies.placement.frame import gpus_in_server
from hrlsched.policies.placement.interference_aware import TopologyPlacement
from hrlsched.policies.placement.pack import PackPlacement

if TYPE_CHECKING:
    from hrlsched.envs.decision import DecisionPoint

PLACEMENT_FEATURES = ("servers", "suffered", "caused", "link_load", "fragments", "balance")
CANDIDATE_SOURCES = ("pack", "balance", "topology", "quiet")
PRIOR = 1.0  # pack's margin: weights . features must pass it for another candidate to win
PRICED_PER_POINT = 16  # the most jobs one decision point chooses for; the others take pack's (module docstring)
_SHARED_KINDS = (1, 2, 3, 4)  # ``board.LINK_KINDS``: switch uplinks, QPI, NICs, rack uplinks


class Candidates:
    """One job's candidate placements (pack's first) and where each comes from (``CANDIDATE_SOURCES``, a set each)."""

    def __init__(self) -> None:
        self.placements: list[Placement] = []
        self.sources: list[set[str]] = []
        self._index: dict[tuple, int] = {}

    def add(self, pl: Placement | None, source: str) -> None:
        if pl is None:
            return
        key = pl.canonical()
        i = self._index.get(key)
        if i is None:
            self._index[key] = len(self.placements)
            self.placements.append(pl)
            self.sources.append({source})
        else:
            self.sources[i].add(source)


class PlacementChoice:
    """The candidates, their features and the weights that choose among
    them (see the module's docstring); ``choose`` is the
    ``DecisionPoint.place_choice`` hook. ``choices``/``departed``: jobs
    placed, and those placed elsewhere than pack would; ``capped``: jobs
    given pack's placement unpriced, past ``priced_per_point`` at a point."""

    def __init__(self, weights: np.ndarray, priced_per_point: int = PRICED_PER_POINT) -> None:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (len(PLACEMENT_FEATURES),):
            raise ValueError(f"placement weights: expected {len(PLACEMENT_FEATURES)} numbers, got shape {w.shape}")
        if priced_per_point < 1:
            raise ValueError(f"priced_per_point: expected a positive number of jobs, got {priced_per_point}")
        self.weights = w
        self._active = bool(w.any())  # (all zero: pack's placement, nothing priced)
        self.priced_per_point = int(priced_per_point)
        self._perf = bool(w[1] or w[2])  # the performance model is asked only where its features count
        self._balance = BalancePlacement()
        self._topology = TopologyPlacement()
        self._shared: tuple[np.ndarray, np.ndarray] | None = None
        self.reset()
        self.choices = 0
        self.departed = 0
        self.capped = 0

    def reset(self) -> None:
        """A new episode: forget the last point (its jobs chosen for, its neighbours), whose key
        (the view's id, the point's number) a new episode's first point could repeat."""
        self._point: tuple[int, int] | None = None  # the point whose neighbours are indexed (``_neighbours``)
        self._priced_at: tuple[tuple[int, int], int] = ((0, -1), 0)  # (the point, jobs chosen for there)

    # ------------------------------------------------------------ the hook
    def choose(self, dp: DecisionPoint, job: Job, pl: Placement) -> Placement:
        """The placement of ``job`` at ``dp``'s current choice, ``pl`` being pack's."""
        self.choices += 1
        if not self._active:
            return pl
        point, priced = self._priced_at
        if point != (id(dp.view), dp.decisions):
            point, priced = (id(dp.view), dp.decisions), 0
        if priced >= self.priced_per_point:
            self.capped += 1
            return pl
        self._priced_at = (point, priced + 1)
        cands = self.candidates(dp, job, pl)
        if len(cands.placements) == 1:
            return pl
        s = self.features(dp, job, cands).dot(self.weights)
        s[0] += PRIOR
        i = int(s.argmax())  # the first best: pack's among ties
        if i:
            self.departed += 1
        return cands.placements[i]

    # ---------------------------------------------------------- candidates
    def candidates(self, dp: DecisionPoint, job: Job, pl: Placement) -> Candidates:
        """``job``'s candidates on ``dp``'s board, ``pl`` (pack's) first; those that do not fit dropped."""
        view, board = dp.view, dp.board
        assert view is not None
        occ = board.occ
        w, p = pl.n_workers, pl.n_ps
        out = Candidates()
        out.add(pl, "pack")
        spread = self._balance.place_job(view, occ, job, w, p)
        out.add(spread, "balance")
        # topology's own candidate set (its choice is one of them), as its place_job builds it: its
        # pack's and balance's placements are these two where the point places by pack (``pl``)
        made = (pl, spread) if type(dp.feas.policy) is PackPlacement else None
        for c in self._topology._candidates(view, occ, job, w, p, made):
            out.add(c, "topology")
        cap = occ.worker_capacity(job)
        if not np.any(cap >= w):
            out.add(_quiet(dp, job, cap, w, p), "quiet")
        # (each is built on the room left, so this guard rarely drops one; the board's check reads
        # the servers and GPUs a placement uses from its index, which ``features`` reads next)
        keep = [0] + [i for i in range(1, len(out.placements)) if board.fits(job, out.placements[i])]
        if len(keep) < len(out.placements):
            out.placements = [out.placements[i] for i in keep]
            out.sources = [out.sources[i] for i in keep]
        return out

    # ------------------------------------------------------------ features
    def features(self, dp: DecisionPoint, job: Job, cands: Candidates) -> np.ndarray:
        """(candidates, ``PLACEMENT_FEATURES``), each relative to the first (pack's) candidate."""
        topo, board = dp.topo, dp.board
        pls = cands.placements
        n = len(pls)
        f = np.zeros((n, len(PLACEMENT_FEATURES)))
        # per candidate, from the board's index of it (servers with its workers and PSs, links;
        # Python over a handful of tasks): the servers it touches; fragments, the servers partly
        # used (some GPUs free, some not) after it against before (only its workers' servers
        # change; whole numbers, so the sum is exact); link load, the jobs decided so far on the
        # shared links it crosses (the index has a placement's links as a set; a placement with
        # two workers on one GPU counts that PCIe link twice)
        free = board.occ.free_gpus_per_server().tolist()
        size = topo.server_gpus
        shared = self._shared_links(dp.link_kind)
        index = board.index
        touched: set[int] = set()
        for i, c in enumerate(pls):
            x = index.get(c)
            f[i, 0] = len(x.per_server)
            partly = 0.0
            for s, w, _ in x.per_server:
                touched.add(s)
                if w:
                    before, after = free[s], free[s] - w
                    partly += float(0 < after < size[s]) - float(0 < before < size[s])
            f[i, 4] = partly
            links = x.links if len(x.per_gpu) == len(c.gpus) else crossed_links(topo, dp.link_off, c)
            links = links[shared[links]]
            f[i, 3] = float(board.link_jobs[links].mean()) if links.size else 0.0
        f[:, 5] = [1.0 if "balance" in s else 0.0 for s in cands.sources]
        if self._perf:
            f[:, 1], f[:, 2] = self._slowdowns(dp, job, pls, sorted(touched))
        return f - f[0]

    def _shared_links(self, link_kind: np.ndarray) -> np.ndarray:
        """Whether each link is of a shared kind (``_SHARED_KINDS``), kept per layout."""
        if self._shared is None or self._shared[0] is not link_kind:
            self._shared = (link_kind, np.isin(link_kind, _SHARED_KINDS))
        return self._shared[1]

    def _slowdowns(self, dp: DecisionPoint, job: Job, pls: list[Placement],
                   servers: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Per candidate: the slowdown the job suffers and the one it causes, in tenths (``features``)."""
        perf = dp.view.perf  # type: ignore[union-attr]
        oj, op = self._neighbours(dp, servers)
        # every candidate's speed alone in one isolated solve (their terms built in one pass, then kept)
        top = max(float(perf.alone_speeds([job] * len(pls), pls, np.full(len(pls), job.batch_size)).max()), 1e-12)
        # the neighbours alone, then with the job at each candidate, each apart
        base, sps = perf.speeds_beside((oj, op), job, pls)
        base = np.maximum(base, 1e-12) if oj else np.zeros(0)
        suffered, caused = np.zeros(len(pls)), np.zeros(len(pls))
        for i, sp in enumerate(sps):
            suffered[i] = 10.0 * (1.0 - sp[-1] / top)
            caused[i] = 10.0 * float(np.sum(1.0 - sp[:-1] / base)) if oj else 0.0
        return suffered, caused

    def _neighbours(self, dp: DecisionPoint, servers: list[int]) -> tuple[list[Job], list[Placement]]:
        """The jobs with a task on ``servers``: those placed at this point, and
        the running jobs not decided yet where they run."""
        view = dp.view
        assert view is not None
        key = (id(view), dp.decisions)
        if key != self._point:  # a new point: its running jobs, indexed by server
            self._point = key
            self._entries: list[tuple[Job, Placement, int]] = []
            self._by_server: dict[int, list[int]] = {}
            self._seen = 0
            for k, pl in enumerate(view.placements[:dp.n_dec]):
                if pl is not None:
                    self._add(dp, view.jobs[k], pl, k)
        placed = dp.placements
        if len(placed) > self._seen:  # placed at this point since the last call (dict order: insertion)
            wl = dp.pricing.workload
            for jid, pl in itertools.islice(placed.items(), self._seen, None):  # (skipped in C: a burst places hundreds)
                j = wl.effective(view.jobs[view.index(jid)], dp.arch.get(jid), dp.mode.get(jid))
                self._add(dp, j, pl, -1)
            self._seen = len(placed)
        idx = sorted({e for s in servers for e in self._by_server.get(s, ())})
        ents = [self._entries[e] for e in idx]
        ents = [(j, pl) for j, pl, k in ents if k < 0 or k > dp.k]  # a running job: until its turn
        return [j for j, _ in ents], [pl for _, pl in ents]

    def _add(self, dp: DecisionPoint, job: Job, pl: Placement, k: int) -> None:
        topo = dp.topo
        e = len(self._entries)
        self._entries.append((job, pl, k))
        srv = set(topo.gpu_server[list(pl.gpus)].tolist()) | set(topo.socket_server[list(pl.ps_sockets)].tolist())
        for s in srv:
            self._by_server.setdefault(s, []).append(e)


def _quiet(dp: DecisionPoint, job: Job, cap: np.ndarray, n_workers: int, n_ps: int) -> Placement | None:
    """``job``'s workers over the servers whose NICs the jobs decided so far cross least (the roomiest
    first among equals), each filled as far as it takes them; its PSs as every placement's."""
    board = dp.board
    occ = board.occ
    nic = board.link_jobs[int(dp.link_off[3]):int(dp.link_off[4])]
    ok = np.flatnonzero(cap > 0)
    order = ok[np.lexsort((-cap[ok], nic[ok]))]
    take = np.cumsum(cap[order])
    m = int(np.searchsorted(take, n_workers)) + 1
    if m > order.size:
        return None
    counts = cap[order[:m]].astype(np.int64)
    counts[-1] -= int(take[m - 1] - n_workers)
    gpus = np.concatenate([gpus_in_server(occ, int(s), int(c)) for s, c in zip(order[:m], counts)])
    if gpus.size < n_workers:
        return None
    ps = occ.ps_sockets_for(job, n_ps, gpus)
    return None if ps is None else Placement.of(gpus, ps)


def placement_weights(ck: dict[str, Any], source: str = "checkpoint") -> np.ndarray | None:
    """The placement choice's weights of a loaded checkpoint (None: it has
    none); ``CheckpointError`` if its features are not this version's or
    the weights are not finite numbers, one per feature."""
    r = ck.get("placement")
    if r is None:
        return None
    if not isinstance(r, dict) or list(r.get("features", [])) != list(PLACEMENT_FEATURES):
        got = r.get("features") if isinstance(r, dict) else r
        raise CheckpointError(f"{source}: its placement's features {got} are not this version's "
                              f"{list(PLACEMENT_FEATURES)}")
    try:
        w = np.asarray(r.get("weights", []), dtype=np.float64)
    except (TypeError, ValueError):
        w = np.zeros(0)
    if w.shape != (len(PLACEMENT_FEATURES),) or not np.all(np.isfinite(w)):
        raise CheckpointError(f"{source}: placement weights: expected {len(PLACEMENT_FEATURES)} finite numbers")
    return w


def with_placement(ck: dict[str, Any], weights: np.ndarray | None) -> dict[str, Any]:
    """``ck`` with these placement weights (None: without a placement choice: pack)."""
    out = {k: v for k, v in ck.items() if k != "placement"}
    if weights is not None:
        out["placement"] = {"features": list(PLACEMENT_FEATURES), "weights": [float(x) for x in weights]}
    return out
