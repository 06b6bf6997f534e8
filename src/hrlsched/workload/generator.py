"""Synthetic workloads calibrated on real traces.

A generated workload is a list of ``TraceRecord``s (written by ``hrlsched
trace generate`` in the generic CSV, or turned into jobs by
``trace.to_jobs`` like any trace), drawn from:

Sizes (``SizeProfile``). GPU counts from the empirical distribution of a
trace; durations, per GPU-count class (1, 2-4, 5-8, 9+ GPUs: large jobs run
longer, which is what makes the 8+-GPU jobs of ITP ~11% of the jobs but ~79%
of the GPU time), by inverse-CDF sampling of the class's empirical quantile
function, linear in log-duration between knots. The profiles below were
fitted on the public files by ``fit_profile`` and are embedded as constants;
the command that produced each is quoted above it. ``hrlsched trace fit``
refits them on any trace.

Arrival processes (``arrival_times``), all conditioned on n jobs in [0, T]:

- ``poisson``: homogeneous (sorted uniforms).
- ``diurnal``: non-homogeneous Poisson whose rate follows the time of day,
  ``diurnal_ratio`` times higher at the 16:00 peak than at the 04:00 trough
  (raised cosine), and ``weekend_factor`` times lower on Saturdays and
  Sundays. Hu et al., "Characterization and Prediction of Deep Learning
  Workloads in Large-Scale GPU Datacenters" (SC'21, Helios) measured
  submissions varying about 9x between night and afternoon, and fewer on
  weekends; the cosine shape and the weekend factor (0.6 by default) are
  our parameterisation, not a fit.
- ``bursty``: a two-state Markov-modulated Poisson process (MMPP-2): a high
  state at ``burst_rate_ratio`` times the rate of the low state, in which the
  process spends ``burst_time_fraction`` of the time (by default the ratio
  is set from the target, see ``mmpp_for_cv``); the state's mean
  sojourn is solved (Brent) so that the stationary inter-arrival coefficient
  of variation is ``target_cv`` (ITP clusters measure 3-13; Poisson is 1).
  The CV of an MMPP's inter-arrival time is exact from its phase-type form:
  E[X^k] = k! phi (-D0)^-k 1, phi the arrival-stationary phase distribution.
- ``replay``: the inter-arrival gaps of a real trace, in order from a
  random start, rescaled to the target rate.

Load. Offered load = sum of GPU-seconds asked / (cluster GPUs x T). Given a
target load, T is set from the drawn sizes so that the offered load over
[0, T] is the target; otherwise T = ``duration_h``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hrlsched.workload.loaders.base import TraceRecord

# Probabilities at which a profile stores its duration quantiles.
# Every 2.5% in the body (real durations are lumpy: 16 knots left a KS distance
# of 0.035 to the ITP files, these 46 leave 0.017), finer in the tails.
QUANTILE_PROBS: tuple[float, ...] = (
    0.0, 0.005, 0.01, 0.025, *(round(0.05 + 0.025 * k, 3) for k in range(37)), 0.975, 0.99, 0.995, 0.999, 1.0,
)
# GPU-count classes (inclusive lower bounds) for the duration quantiles.
CLASS_EDGES: tuple[int, ...] = (1, 2, 5, 9)


@dataclass(frozen=True)
class SizeProfile:
    """GPU counts and durations of a trace."""

    name: str
    gpu_counts: tuple[int, ...]
    gpu_probs: tuple[float, ...]
    # Per class of CLASS_EDGES: durations (s) at QUANTILE_PROBS; None for a class with no job.
    duration_quantiles: tuple[tuple[float, ...] | None, ...]
    source: str = ""

    def classes(self, gpus: np.ndarray) -> np.ndarray:
        return np.searchsorted(np.asarray(CLASS_EDGES), gpus, side="right") - 1

    def sample_gpus(self, n: int, rng: np.random.Generator) -> np.ndarray:
        p = np.asarray(self.gpu_probs, dtype=float)
        return rng.choice(np.asarray(self.gpu_counts), size=n, p=p / p.sum())

    def sample_durations(self, gpus: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        u = rng.random(gpus.size)
        out = np.empty(gpus.size)
        cls = self.classes(gpus)
        probs = np.asarray(QUANTILE_PROBS)
        for c in np.unique(cls):
            q = self.duration_quantiles[c] if c < len(self.duration_quantiles) else None
            if q is None:  # no job of this class in the trace: use the nearest class that has some
                q = next(x for x in reversed(self.duration_quantiles) if x is not None)
            m = cls == c
            out[m] = np.exp(np.interp(u[m], probs, np.log(np.asarray(q))))
        return out

    def quantile(self, cls: int, p: float) -> float:
        q = self.duration_quantiles[cls]
        if q is None:
            raise ValueError(f"profile {self.name}: no job in GPU class {cls}")
        return float(np.exp(np.interp(p, QUANTILE_PROBS, np.log(q))))

    def mean_gpu_seconds(self) -> float:
        """E[gpus x duration] under the profile (numerical, on a fine grid)."""
        u = (np.arange(20000) + 0.5) / 20000
        probs = np.asarray(QUANTILE_PROBS)
        total = 0.0
        p = np.asarray(self.gpu_probs) / np.sum(self.gpu_probs)
        for g, pg in zip(self.gpu_counts, p):
            c = int(self.classes(np.array([g]))[0])
            q = self.duration_quantiles[c] or next(x for x in reversed(self.duration_quantiles) if x is not None)
            total += pg * g * float(np.exp(np.interp(u, probs, np.log(np.asarray(q)))).mean())
        return total


def fit_profile(records: Sequence[TraceRecord], name: str, source: str = "") -> SizeProfile:
    """The empirical GPU-count distribution and per-class duration quantiles
    of the records that have a duration and at least one GPU."""
    recs = [r for r in records if r.duration_s is not None and r.gpus >= 1]
    if not recs:
        raise ValueError(f"{name}: no record with GPUs and a duration to fit")
    g = np.array([r.gpus for r in recs])
    d = np.array([r.duration_s for r in recs], dtype=float)
    counts, freq = np.unique(g, return_counts=True)
    cls = np.searchsorted(np.asarray(CLASS_EDGES), g, side="right") - 1
    qs: list[tuple[float, ...] | None] = []
    for c in range(len(CLASS_EDGES)):
        dc = d[cls == c]
        qs.append(tuple(round(float(x), 1) for x in np.quantile(dc, QUANTILE_PROBS)) if dc.size else None)
    return SizeProfile(name, tuple(int(x) for x in counts), tuple(round(float(f) / len(g), 6) for f in freq),
                       tuple(qs), source)


def profile_literal(p: SizeProfile) -> str:
    """Python source of a profile, for embedding below."""
    return (f"SizeProfile(\n    name={p.name!r},\n    gpu_counts={p.gpu_counts!r},\n    gpu_probs={p.gpu_probs!r},\n"
            f"    duration_quantiles=(\n" + "".join(f"        {q!r},\n" for q in p.duration_quantiles)
            + f"    ),\n    source={p.source!r},\n)")


# Fitted by: hrlsched trace fit ../shared/data/itp/cluster*.csv --format itp --name itp
# (69,351 jobs of the 10 ITP clusters; jobs under 600 s were removed by the publishers)
ITP_PROFILE = SizeProfile(
    name='itp',
    gpu_counts=(1, 2, 4, 8, 16, 32, 64),
    gpu_probs=(0.83174, 0.021384, 0.034188, 0.101066, 0.005494, 0.005104, 0.001024),
    duration_quantiles=(
        (600.0, 631.0, 671.0, 804.0, 987.0, 1085.0, 1288.0, 1554.0, 1803.0, 2184.0, 2526.0, 2916.2, 3909.0, 4832.0, 5518.0, 6185.7, 7079.3, 7457.0, 7558.0, 7686.0, 8004.0, 8857.5, 10131.5, 10670.0, 10976.6, 11649.0, 11717.0, 11774.0, 11872.0, 12823.0, 13572.0, 13766.0, 14367.8, 15168.8, 16399.0, 18545.5, 18941.8, 20593.9, 25322.0, 26247.9, 28837.0, 51231.7, 84626.5, 114939.0, 409211.2, 1573360.0),
        (601.0, 631.0, 663.6, 742.6, 808.0, 836.0, 1282.5, 1650.2, 1975.8, 2416.6, 2561.6, 2786.0, 2981.2, 3050.0, 3280.4, 3451.0, 3494.0, 3661.5, 3754.2, 3813.0, 3913.0, 4107.2, 4259.5, 4997.3, 5818.4, 6268.0, 7007.2, 7822.2, 8850.4, 9158.6, 10016.6, 12097.8, 16971.0, 21720.5, 26714.2, 33858.3, 44756.3, 57658.9, 73509.6, 103243.4, 151327.7, 277015.8, 646894.2, 731923.9, 992861.5, 1114383.0),
        (600.0, 633.0, 698.0, 795.2, 1085.6, 1432.2, 1975.2, 2451.0, 3230.0, 4121.8, 5035.2, 6326.8, 7216.0, 7859.2, 9638.2, 11056.2, 11794.8, 12977.0, 13723.4, 14412.2, 15141.0, 16988.8, 18320.0, 20060.0, 22055.0, 23926.0, 27463.4, 29988.0, 32423.0, 36064.4, 40487.2, 44336.0, 49419.0, 58125.8, 65808.4, 77320.8, 88721.4, 103524.0, 130124.6, 159846.2, 207474.8, 322686.8, 507810.7, 665184.6, 992626.8, 1237189.0),
        (602.0, 613.0, 624.1, 675.1, 798.5, 1029.0, 1389.5, 1636.5, 2013.0, 2360.6, 3193.0, 3275.2, 3833.8, 4105.0, 4517.0, 5950.0, 9048.0, 13477.0, 18958.0, 25182.1, 32563.2, 36205.1, 41277.5, 46968.4, 55373.8, 59782.6, 63508.0, 67886.1, 79018.5, 83294.2, 86554.5, 91729.9, 106415.0, 112227.0, 117985.0, 130262.8, 145968.8, 158012.1, 197600.0, 257472.0, 297766.0, 398986.0, 544403.8, 598250.7, 739918.0, 1022894.0),
    ),
    source='hrlsched trace fit ../shared/data/itp/cluster*.csv --format itp --name itp',
)

# Fitted by: hrlsched trace fit ../shared/data/pollux/traces/philly.csv --format philly --name philly
PHILLY_PROFILE = SizeProfile(
    name='philly',
    gpu_counts=(1, 2, 4, 8, 12, 16, 24, 32, 64, 128),
    gpu_probs=(0.931669, 0.022104, 0.022736, 0.019976, 8.5e-05, 0.00242, 8.5e-05, 0.000815, 7.3e-05, 3.6e-05),
    duration_quantiles=(
        (1.0, 22.0, 30.0, 44.0, 52.0, 58.0, 62.0, 66.0, 69.0, 72.0, 76.0, 87.0, 122.0, 171.0, 215.0, 302.0, 385.0, 527.0, 600.0, 714.0, 855.0, 959.0, 1117.0, 1278.0, 1446.0, 1542.0, 1728.0, 1915.2, 2054.0, 2278.0, 2464.2, 2583.0, 2716.0, 3137.0, 3754.0, 4349.0, 5342.1, 5911.0, 8512.0, 11166.1, 19137.0, 55518.4, 135399.3, 266914.1, 865708.7, 3256045.0),
        (2.0, 5.0, 6.0, 9.0, 11.0, 13.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 23.0, 25.0, 28.0, 33.0, 45.0, 85.0, 110.0, 149.0, 183.0, 367.0, 679.7, 1207.7, 2937.6, 5582.8, 10038.4, 14305.0, 18922.4, 25424.5, 33150.1, 45388.2, 61571.7, 79258.0, 89026.6, 99994.1, 123762.2, 166119.9, 185891.5, 233082.4, 422072.4, 747317.3, 1122854.9, 2171244.0, 2750674.0),
        (1.0, 20.4, 33.4, 72.0, 125.0, 172.1, 216.2, 319.5, 463.9, 551.0, 784.6, 1057.9, 1876.0, 3009.4, 4011.4, 5175.9, 7266.5, 10331.0, 12382.2, 13793.1, 16650.6, 21160.1, 23683.0, 30273.6, 36595.0, 53329.0, 65014.0, 90611.0, 105941.4, 123778.7, 140721.4, 159174.3, 173248.5, 185594.7, 203050.0, 221349.1, 242251.5, 271623.8, 351981.6, 408313.7, 525618.2, 743402.7, 1060498.2, 2000448.1, 2656479.2, 4628226.0),
        (1.0, 2.0, 3.8, 11.2, 35.4, 45.8, 72.2, 120.0, 219.8, 289.8, 345.0, 416.8, 566.0, 702.4, 889.6, 1226.2, 1531.6, 2479.0, 3166.6, 5340.4, 8521.6, 13549.6, 21137.0, 31630.8, 45315.0, 48398.0, 53749.8, 55944.0, 58976.2, 65203.8, 73310.8, 90526.4, 104218.0, 124536.8, 158991.4, 165859.8, 181582.0, 210586.0, 247972.0, 330234.4, 443240.4, 532106.6, 922628.7, 1274180.8, 1612502.1, 1710643.0),
    ),
    source='hrlsched trace fit ../shared/data/pollux/traces/philly.csv --format philly --name philly',
)

PROFILES: dict[str, SizeProfile] = {p.name: p for p in (ITP_PROFILE, PHILLY_PROFILE)}


# ---------------------------------------------------------------- arrivals

PEAK_HOUR = 16.0  # diurnal peak (afternoon); trough 12 h earlier


def diurnal_rate(t_s: np.ndarray, ratio: float, weekend_factor: float, start_hour: float = 0.0,
                 start_weekday: int = 0) -> np.ndarray:
    """Relative arrival rate at times ``t_s`` (0 = ``start_hour`` o'clock on
    weekday ``start_weekday``, 0 = Monday): 1 at the trough, ``ratio`` at the
    peak, times ``weekend_factor`` on Saturdays and Sundays."""
    hours = start_hour + np.asarray(t_s, dtype=float) / 3600.0
    hod = np.mod(hours, 24.0)
    day = (start_weekday + np.floor(hours / 24.0).astype(np.int64)) % 7
    shape = 1.0 + (ratio - 1.0) * 0.5 * (1.0 + np.cos(2 * np.pi * (hod - PEAK_HOUR) / 24.0))
    return shape * np.where(day >= 5, weekend_factor, 1.0)


def _diurnal(n: int, horizon: float, rng: np.random.Generator, ratio: float, weekend_factor: float,
             start_hour: float, start_weekday: int) -> np.ndarray:
    # Inverse of the cumulative intensity on a 60 s grid: exact for n arrivals given in [0, T].
    steps = max(int(np.ceil(horizon / 60.0)), 1)
    grid = np.linspace(0.0, horizon, steps + 1)
    rate = diurnal_rate(0.5 * (grid[1:] + grid[:-1]), ratio, weekend_factor, start_hour, start_weekday)
    cum = np.concatenate([[0.0], np.cumsum(rate * np.diff(grid))])
    return np.sort(np.interp(rng.random(n) * cum[-1], cum, grid))


@dataclass(frozen=True)
class MMPP2:
    """Two-state MMPP: arrival rates (high, low), rates of leaving each state."""

    rates: tuple[float, float]
    leave: tuple[float, float]

    def _d(self) -> tuple[np.ndarray, np.ndarray]:
        l1, l2 = self.rates
        r1, r2 = self.leave
        d0 = np.array([[-(l1 + r1), r1], [r2, -(l2 + r2)]])
        return d0, np.diag([l1, l2])

    def stationary(self) -> np.ndarray:
        r1, r2 = self.leave
        return np.array([r2, r1]) / (r1 + r2)

    def mean_rate(self) -> float:
        return float(self.stationary() @ np.asarray(self.rates))

    def interarrival_cv(self) -> float:
        d0, d1 = self._d()
        phi = self.stationary() @ d1
        phi = phi / phi.sum()
        inv = np.linalg.inv(-d0)
        m1 = float(phi @ inv @ np.ones(2))
        m2 = float(2 * phi @ inv @ inv @ np.ones(2))
        return float(np.sqrt(max(m2 / m1**2 - 1.0, 0.0)))

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """The first ``n`` arrival times, starting in the stationary state."""
        state = int(rng.random() >= self.stationary()[0])  # 0 = high
        starts: list[np.ndarray] = []
        lens: list[np.ndarray] = []
        sts: list[np.ndarray] = []
        t, got = 0.0, 0
        batch = 64
        while got < n:
            # Alternate sojourns, vectorised in batches of cycles.
            st = (state + np.arange(batch)) % 2
            dur = rng.exponential(1.0 / np.asarray(self.leave)[st])
            beg = t + np.concatenate([[0.0], np.cumsum(dur)[:-1]])
            cnt = rng.poisson(np.asarray(self.rates)[st] * dur)
            starts.append(beg)
            lens.append(dur)
            sts.append(cnt)
            got += int(cnt.sum())
            t = float(beg[-1] + dur[-1])
            state = int((st[-1] + 1) % 2)
            batch = min(batch * 2, 1 << 16)
        beg, dur, cnt = np.concatenate(starts), np.concatenate(lens), np.concatenate(sts)
        times = np.repeat(beg, cnt) + rng.random(int(cnt.sum())) * np.repeat(dur, cnt)
        return np.sort(times)[:n]


def mmpp_for_cv(target_cv: float, rate_ratio: float | None = None, high_fraction: float = 0.05) -> MMPP2:
    """An MMPP-2 of mean rate 1 with the given inter-arrival CV: states at
    rates ``rate_ratio``:1, the high one ``high_fraction`` of the time; the
    mean sojourn is solved for. The CV grows with the sojourn up to that of
    the hyperexponential mixture of the two rates, CV^2 -> 2(1-f)(fK+1-f) - 1;
    without a ratio, K is set so that this bound is (2 x target)^2, which
    leaves the solved sojourn well inside its range."""
    if target_cv <= 1.0:
        raise ValueError(f"workload.target_cv: an MMPP is burstier than Poisson; expected > 1, got {target_cv}")
    f = high_fraction
    if rate_ratio is None:
        rate_ratio = max(((4 * target_cv**2 + 1) / (2 * (1 - f)) - (1 - f)) / f, 2.0)
    low = 1.0 / (f * rate_ratio + (1 - f))
    rates = (rate_ratio * low, low)

    def make(log_sojourn: float) -> MMPP2:
        high_sojourn = float(np.exp(log_sojourn))  # mean time in the high state, in mean inter-arrivals
        r1 = 1.0 / high_sojourn
        return MMPP2(rates, (r1, r1 * f / (1 - f)))

    lo, hi = np.log(1e-4), np.log(1e7)
    cv_lo, cv_hi = make(lo).interarrival_cv(), make(hi).interarrival_cv()
    if not cv_lo <= target_cv <= cv_hi:
        raise ValueError(
            f"workload.target_cv: {target_cv} is out of reach with burst_rate_ratio={rate_ratio} and "
            f"burst_time_fraction={high_fraction} (reachable: {cv_lo:.2f} to {cv_hi:.2f}); raise the ratio"
        )
    # Imported here: scipy.optimize costs 0.5 s of start-up for every command.
    from scipy.optimize import brentq

    x = brentq(lambda s: make(s).interarrival_cv() - target_cv, lo, hi, xtol=1e-10)
    return make(x)


def replay_gaps(arrivals: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """n consecutive inter-arrival gaps of a trace from a random start (wrapping)."""
    gaps = np.diff(np.sort(np.asarray(arrivals, dtype=float)))
    gaps = gaps[np.isfinite(gaps)]
    if gaps.size == 0 or gaps.sum() <= 0:
        raise ValueError("replay: the trace needs at least two distinct arrival times")
    start = int(rng.integers(gaps.size))
    return np.take(gaps, np.arange(start, start + n), mode="wrap")


def arrival_times(process: str, n: int, horizon_s: float, rng: np.random.Generator, **kw: Any) -> np.ndarray:
    """n sorted arrival times in [0, horizon_s) from ``process``."""
    if process == "poisson":
        return np.sort(rng.uniform(0.0, horizon_s, size=n))
    if process == "diurnal":
        return _diurnal(n, horizon_s, rng, kw.get("diurnal_ratio", 9.0), kw.get("weekend_factor", 0.6),
                        kw.get("start_hour", 0.0), kw.get("start_weekday", 0))
    if process in ("bursty", "replay"):
        # n+1 arrivals of a stationary process, time scaled so that the (n+1)-th falls at T:
        # the mean rate is n/T and the CV (scale-free) is kept.
        if process == "bursty":
            mmpp = mmpp_for_cv(kw.get("target_cv", 5.0), kw.get("burst_rate_ratio"),
                               kw.get("burst_time_fraction", 0.05))
            t = mmpp.sample(n + 1, rng)
        else:
            t = np.cumsum(replay_gaps(kw["replay_arrivals"], n + 1, rng))
        t = t - t[0] + rng.random() * (t[1] - t[0]) if n > 1 else t
        return np.sort(t[:n] * (horizon_s / t[n]))
    raise ValueError(f"workload.arrivals: expected poisson, diurnal, bursty or replay, got {process!r}")


def generate_records(
    n: int,
    profile: SizeProfile,
    rng: np.random.Generator,
    *,
    arrivals: str = "poisson",
    cluster_gpus: int | None = None,
    load: float | None = None,
    duration_h: float | None = None,
    users: int = 8,
    **arrival_kw: Any,
) -> list[TraceRecord]:
    """n jobs with sizes from ``profile`` and arrivals from ``arrivals``.
    With ``load`` (and ``cluster_gpus``), the arrival window is set so that
    the offered load on it is ``load``; jobs larger than the cluster are
    capped at its size first. Without, arrivals span ``duration_h``."""
    if n < 1:
        raise ValueError(f"workload.jobs: expected >= 1, got {n}")
    gpus = profile.sample_gpus(n, rng)
    if cluster_gpus is not None:
        gpus = np.minimum(gpus, cluster_gpus)
    dur = np.round(profile.sample_durations(gpus, rng), 1)
    if load is not None:
        if not cluster_gpus:
            raise ValueError("workload.load: a target load needs the cluster's GPU count")
        if load <= 0:
            raise ValueError(f"workload.load: expected > 0, got {load}")
        horizon = float((gpus * dur).sum()) / (load * cluster_gpus)
    elif duration_h is not None:
        horizon = duration_h * 3600.0
    else:
        raise ValueError("workload: give either a target load or duration_h")
    t = np.round(arrival_times(arrivals, n, horizon, rng, **arrival_kw), 3)
    user = rng.integers(0, users, size=n)
    return [TraceRecord(name=f"gen-{i}", arrival_s=float(t[i]), gpus=int(gpus[i]), duration_s=float(dur[i]),
                        user=f"user{user[i]}") for i in range(n)]


def offered_load(records: Sequence[TraceRecord], cluster_gpus: int, horizon_s: float) -> float:
    """GPU-seconds asked / (GPUs x horizon)."""
    return sum(r.gpu_seconds for r in records) / (cluster_gpus * horizon_s)


def build_generated_workload(cfg: Any, sizer: Any, rng: np.random.Generator) -> list:
    """The ``kind: generated`` workload of a scenario (``config.GeneratedWorkload``);
    ``sizer``: a ``core.sizing.WorkSizer``. ``open_fraction`` of the jobs
    leave arch and mode to the scheduler (``workload.trace.to_jobs``)."""
    from hrlsched.data import needs_data, resolve_path
    from hrlsched.workload.loaders import load_trace
    from hrlsched.workload.trace import build_buckets, to_jobs

    kw: dict[str, Any] = {}
    if cfg.arrivals == "diurnal":
        kw = {"diurnal_ratio": cfg.diurnal_ratio, "weekend_factor": cfg.weekend_factor,
              "start_hour": cfg.start_hour, "start_weekday": cfg.start_weekday}
    elif cfg.arrivals == "bursty":
        kw = {"target_cv": cfg.target_cv, "burst_rate_ratio": cfg.burst_rate_ratio,
              "burst_time_fraction": cfg.burst_time_fraction}
    elif cfg.arrivals == "replay":
        path = resolve_path(cfg.replay_path)
        if not path.exists():
            from hrlsched.data import WHERE, DataMissingError

            if needs_data(cfg.replay_path):
                raise DataMissingError(f"workload.replay_path: {path} not found. This scenario needs the public data folder: {WHERE}")
            raise ValueError(f"workload.replay_path: {path}: no such file")
        kw = {"replay_arrivals": np.array([r.arrival_s for r in load_trace(path, cfg.replay_format)])}
    records = generate_records(cfg.jobs, PROFILES[cfg.sizes], rng, arrivals=cfg.arrivals,
                               cluster_gpus=sizer.n_gpus, load=cfg.load, duration_h=cfg.duration_h,
                               users=cfg.users, **kw)
    return to_jobs(records, sizer, rng, models=cfg.models, assignment=cfg.model_assignment,
                   buckets=build_buckets(cfg.buckets), mix=cfg.mix, allreduce_fraction=cfg.allreduce_fraction,
                   open_fraction=cfg.open_fraction,
                   oversize=cfg.oversize, source=f"generated:{cfg.sizes}/{cfg.arrivals}")
