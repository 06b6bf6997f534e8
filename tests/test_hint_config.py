"""``HintConfig``: the one home of the hint's settings."""

import dataclasses

import pytest

from hrlsched.policies.hint import SHIPPED, HintConfig
from hrlsched.policies.optimus import Optimus

MENU = [1, 2, 4, 8, 16, 32]


def test_every_setting_has_a_short_name_and_a_doc() -> None:
    fields = dataclasses.fields(HintConfig)
    shorts = [f.metadata["short"] for f in fields]
    assert len(set(shorts)) == len(shorts)
    assert all(f.metadata["doc"] for f in fields)


def test_text_round_trips() -> None:
    assert HintConfig().text() == ""
    for cfg in (SHIPPED, HintConfig(policy=None), HintConfig(reserve_running=False, observe_rounds=True, keep_s=30),
                HintConfig(window="hint-order", bonus=-0.5, gap=-2), HintConfig(batch="goodput")):
        assert HintConfig.parse(cfg.text()) == cfg, cfg.text()
    assert HintConfig.parse("a=1,remaining_weight=2").remaining_weight == 2.0  # long names too, last wins
    assert HintConfig.parse("f=0.3", base=SHIPPED) == dataclasses.replace(SHIPPED, keep_frac=0.3)


@pytest.mark.parametrize("text, field", [
    ("x=1", "unknown setting 'x'"), ("a=-1", "remaining_weight"), ("a=abc", "remaining_weight"),
    ("r=maybe", "reserve_running"), ("win=foo", "window"), ("menu=2", "on_menu"), ("re=0", "recheck_s"),
    ("first=size", "first_order"), ("rem=truth", "remaining_from"), ("g=inf", "gap"), ("p=none,win=hint", "window"),
    ("p=none,a=1", "without a hint policy"), ("batch=tuned", "batch"),
])
def test_bad_settings_are_named(text: str, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        HintConfig.parse(text)


def test_flags_are_not_numbers() -> None:
    with pytest.raises(ValueError, match="reserve_running"):
        HintConfig(reserve_running=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="on_menu"):
        HintConfig(on_menu=1)  # type: ignore[arg-type]


def test_env_kwargs_round_trip_and_the_stored_format() -> None:
    kw = SHIPPED.env_kwargs(MENU)
    assert kw == {"hint": "optimus", "hint_options": {
        "remaining_weight": 1.25, "keep_s": 0.0, "keep_frac": 0.2, "first_order": "remaining",
        "remaining_from": "view", "worker_counts": MENU}, "reserve_running": "hint", "window": "hint",
        "recheck_s": 600.0, "batch": "goodput"}
    assert HintConfig.from_env_kwargs({**kw, "worker_options": MENU}, gap=8.0, bonus=1.0) == SHIPPED
    assert HintConfig().env_kwargs(MENU) == {"hint": "optimus"}  # defaults are not written
    own = dataclasses.replace(SHIPPED, batch="own")  # (a file made before the batch rule: no entry)
    assert own.env_kwargs(MENU) == {k: v for k, v in kw.items() if k != "batch"}
    assert HintConfig.from_env_kwargs({**own.env_kwargs(MENU), "worker_options": MENU}, gap=8.0, bonus=1.0) == own
    with pytest.raises(ValueError, match="worker_counts"):
        HintConfig.from_env_kwargs({**kw, "worker_options": [1, 2]})
    with pytest.raises(ValueError, match="unknown options"):
        HintConfig.from_env_kwargs({"hint": "optimus", "hint_options": {"speed": 1}})


def test_make_policy() -> None:
    assert HintConfig(policy=None).make_policy(MENU) is None
    plain = HintConfig().make_policy(MENU)
    assert isinstance(plain, Optimus) and plain.tuning == HintConfig() and plain.worker_counts is None
    tuned = SHIPPED.make_policy(MENU)
    assert tuned.tuning is SHIPPED and tuned.worker_counts == tuple(MENU) and tuned.remaining_from == "view"
    assert HintConfig(policy="srtf").make_policy(MENU).name == "srtf"
    with pytest.raises(ValueError, match="takes no options"):
        HintConfig(policy="srtf", keep_s=1).make_policy(MENU)
    with pytest.raises(ValueError, match="unknown allocation policy"):
        HintConfig(policy="nope").make_policy(MENU)
