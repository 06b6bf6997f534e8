import numpy as np
import pytest

from hrlsched.cluster import Placement, Topology
from hrlsched.core import CATALOGUE, Job, get_profile
from hrlsched.perf import OptimusModel
from hrlsched.policies import make_scheduler
from hrlsched.sim import EngineConfig, Simulator
from hrlsched.sim.metrics import finish_time_fairness, job_table, percentile, summary
from tests.helpers import Scripted, job


@pytest.mark.parametrize(
    ("kw", "field"),
    [({"total_samples": 0}, "total_samples"), ({"batch_size": 0}, "batch_size"), ({"requested_gpus": 0}, "requested_gpus"),
     ({"arch": "mesh"}, "arch"), ({"mode": "semi"}, "mode"), ({"requested_ps": 0}, "requested_ps"), ({"arrival_s": -1}, "arrival_s")],
)
def test_job_validation_names_the_field(kw: dict, field: str) -> None:
    base = {"job_id": 3, "arrival_s": 0.0, "model": "vgg-16", "total_samples": 10.0, "batch_size": 32}
    with pytest.raises(ValueError, match=f"job 3 .*{field}"):
        Job(**{**base, **kw})


def test_catalogue_has_the_dl2_models_and_names_unknown_ones() -> None:
    for m in ("resnet-50", "vgg-16", "resnext-110", "inception-bn", "seq2seq", "cnn-text-classification", "dssm", "wlm"):
        p = get_profile(m)
        assert len(p.theta) == 5 and min(p.theta) >= 0 and p.theta[0] > 0
    with pytest.raises(KeyError, match="not in the catalogue"):
        get_profile("gpt-5")


def test_finish_time_fairness_of_a_lone_job_is_about_one(topo: Topology, perf: OptimusModel) -> None:
    j = job(0, samples=1e5, gpus=2)
    res = Simulator(topo, [j], perf, make_scheduler("fifo"), EngineConfig(round_s=60.0, restart_s=0.0)).run()
    # Alone at its request on a consolidated placement: shared time == isolated time.
    assert finish_time_fairness(res)[0] == pytest.approx(1.0, rel=1e-6)


def test_summary_and_job_table_agree(topo: Topology, perf: OptimusModel) -> None:
    jobs = [job(i, arrival=60.0 * i, samples=2e4, gpus=4) for i in range(6)]
    res = Simulator(topo, jobs, perf, make_scheduler("fifo"), EngineConfig(round_s=60.0)).run()
    t = job_table(res)
    s = summary(res, "fifo", "t")
    assert s["avg_jct_s"] == pytest.approx(float(np.mean(t["jct_s"])))
    assert s["jobs_completed"] == 6 and 0 < s["gpu_util_mean"] <= 1
    assert np.all(t["mean_workers"] == 4) and np.all(t["mean_ps"] == 1)
    np.testing.assert_allclose(t["gpu_seconds"], 4 * res.hold_s)


def test_mean_slowdown_is_one_without_neighbours(topo: Topology, perf: OptimusModel) -> None:
    j = job(0, samples=1e4)
    pl = Placement((0,), (0,))
    res = Simulator(topo, [j], perf, Scripted(lambda v: {0: pl}), EngineConfig()).run()
    assert job_table(res)["mean_slowdown"][0] == pytest.approx(1.0)
    assert CATALOGUE["resnet-50"].restart_s == res.hold_s[0] - res.productive_s[0]


def test_percentile_is_numpys_to_the_bit() -> None:
    rng = np.random.default_rng(0)
    for n in [*range(1, 40), 157, 1000]:
        for x in (rng.lognormal(8, 2, n), rng.integers(0, 50, n).astype(float)):
            for p in (0, 1, 25, 50, 95, 99, 99.9, 100, float(rng.uniform(0, 100))):
                assert percentile(x, p) == float(np.percentile(x, p)), (n, p)
