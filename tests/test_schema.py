"""Settings validated field by field (``hrlsched.schema``): conversions, bounds,
unknown and missing keys, settings told apart by their kind, the checks after
the fields, and every error named at once by its dotted place."""

from __future__ import annotations

from typing import Any, Literal

import pytest

from hrlsched.schema import SchemaError, Settings, setting


class Inner(Settings):
    rate: float = setting(1.0, gt=0)
    names: list[str] = setting(factory=lambda: ["a"], min_length=1)


class KindA(Settings):
    kind: Literal["a"] = "a"
    size: int = setting(1, ge=1, le=8)

    def _check(self) -> None:
        if self.size == 3:
            raise ValueError("size: three is refused")


class KindB(KindA):
    kind: Literal["b"] = "b"  # type: ignore[assignment]
    extra: str | None = None

    def _check_b(self) -> None:
        if self.extra == "x":
            raise ValueError("extra: x is refused")


class Outer(Settings):
    name: str
    inner: Inner = setting(factory=Inner)
    mode: Literal["on", "off"] | None = None
    part: KindA | KindB
    options: dict[str, Any] = setting(factory=dict)
    weights: dict[str, float] | None = None


def _errors(data: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(SchemaError) as e:
        Outer.validate(data)
    return [(loc, msg) for loc, msg, _, _ in e.value.errors]


def test_lax_conversions_that_yaml_needs() -> None:
    o = Outer.validate({"name": "n", "inner": {"rate": 2}, "part": {"kind": "a", "size": 4.0},
                        "weights": {"x": 1}, "options": {"k": [1, 2]}})
    assert o.inner.rate == 2.0 and isinstance(o.inner.rate, float)
    assert o.part.size == 4 and isinstance(o.part.size, int)
    assert o.weights == {"x": 1.0} and isinstance(o.weights["x"], float)
    assert Outer.validate({"name": "n", "inner": {"rate": "1e-3"}, "part": {"kind": "a"}}).inner.rate == 0.001


def test_the_kind_picks_the_settings_class() -> None:
    assert type(Outer.validate({"name": "n", "part": {"kind": "b", "extra": "y"}}).part) is KindB
    assert type(Outer.validate({"name": "n", "part": {"kind": "a"}}).part) is KindA
    assert _errors({"name": "n", "part": {"kind": "c"}}) == [("part.kind", "expected one of 'a', 'b'")]
    assert _errors({"name": "n", "part": {"size": 2}}) == [("part.kind", "expected one of 'a', 'b'")]


def test_every_error_is_named_by_its_place() -> None:
    errs = _errors({"inner": {"rate": 0, "names": [], "bogus": 1}, "mode": "maybe", "part": {"kind": "a", "size": True}})
    assert ("name", "required") in errs
    assert ("inner.bogus", "unknown setting; expected one of names, rate") in errs
    assert ("mode", "expected one of 'on', 'off'") in errs
    assert ("part.size", "expected an integer") in errs  # a bool is not an integer
    assert _errors({"name": "n", "inner": {"rate": 0, "names": []}, "part": {"kind": "a"}}) == [
        ("inner.rate", "expected a value > 0"), ("inner.names", "expected at least 1 item")]
    assert _errors({"name": 3, "part": {"kind": "a", "size": 9}}) == [("name", "expected a string"),
                                                                       ("part.size", "expected a value <= 8")]
    assert _errors({"name": "n", "part": {"kind": "a"}, "inner": {"rate": "fast"}}) == [("inner.rate", "expected a number")]
    assert _errors({"name": "n", "part": {"kind": "a"}, "weights": {"x": "heavy"}}) == [("weights.x", "expected a number")]
    assert _errors({"name": "n", "part": {"kind": "a"}, "inner": [1]}) == [("inner", "expected a mapping")]


def test_checks_run_after_the_fields_base_first() -> None:
    assert _errors({"name": "n", "part": {"kind": "a", "size": 3}}) == [("part", "size: three is refused")]
    assert _errors({"name": "n", "part": {"kind": "b", "size": 3, "extra": "x"}}) == [("part", "size: three is refused")]
    assert _errors({"name": "n", "part": {"kind": "b", "extra": "x"}}) == [("part", "extra: x is refused")]
    assert _errors({"name": "n", "part": {"kind": "a", "size": 0}}) == [("part.size", "expected a value >= 1")]


def test_built_from_code_is_validated_too_and_dumps_in_order() -> None:
    with pytest.raises(SchemaError, match=r"inner\.rate: expected a value > 0"):
        Outer(name="n", part=KindA(), inner={"rate": -1})
    o = Outer(name="n", part={"kind": "b"}, options={"k": (1, 2)})
    assert isinstance(o.part, KindB)
    assert o.dump() == {"name": "n", "inner": {"rate": 1.0, "names": ["a"]}, "mode": None,
                        "part": {"kind": "b", "size": 1, "extra": None}, "options": {"k": [1, 2]}, "weights": None}
    assert Outer.validate(o.dump()) == Outer(name="n", part={"kind": "b"}, options={"k": [1, 2]})
    assert Inner().names is not Inner().names  # a factory per instance
