"""Settings as dataclasses validated field by field: the types and bounds of a
field are its declaration, a wrong value is named by its dotted place.

A ``Settings`` subclass is a keyword-only dataclass. Building one, from code
(``ServerGroupSpec(count=2)``) or from parsed YAML/JSON (``RunConfig.validate(data)``),
converts and checks every field against its annotation and its ``setting(...)``
bounds; nested mappings become the nested settings; unknown keys are refused;
methods named ``_check*`` run after the fields are valid (a ``ValueError`` they
raise is reported at the settings' place). All the problems found are raised
together as one ``SchemaError``.

Why not pydantic, which did this before: importing it and building its models
was about 65 ms of CPU in a 0.3 s ``hrlsched simulate`` (a fifth of the command
a user times, ``benchmarks/simulate_phases.py``), for thirteen flat models. The
conversions kept are pydantic's lax ones that YAML and ``--set`` need: an
integer where a number is expected, an integral number where an integer is, a
number written as a string (YAML 1.1 reads ``1e-3`` as one).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal, TypeVar, Union

_MISSING = dataclasses.MISSING
_BAD = object()  # a value that failed; its error is already recorded
_FIELDS: dict[type, list[tuple[str, Any, dict[str, Any]]]] = {}
_S = TypeVar("_S", bound="Settings")


class SchemaError(ValueError):
    """Every invalid field of one validation: ``errors`` is a list of
    ``(place, message, input, show_input)``; ``place`` is dotted (``sim.round_s``)."""

    def __init__(self, errors: list[tuple[str, str, Any, bool]]) -> None:
        self.errors = errors
        super().__init__("\n".join(self.lines()))

    def lines(self, under: str = "") -> list[str]:
        """One line per error, ``place: message (got input)``; ``under``: the key the settings
        sit under where they were read (``cluster`` in a scenario file), put before each place."""
        return [f"{_join(under, loc) or '(top level)'}: {msg}" + (f" (got {inp!r})" if show else "")
                for loc, msg, inp, show in self.errors]


def setting(default: Any = _MISSING, *, factory: Any = _MISSING, gt: float | None = None, ge: float | None = None,
            lt: float | None = None, le: float | None = None, min_length: int | None = None,
            description: str = "", omit_default: bool = False) -> Any:
    """A field with its bounds (``gt``, ``ge``, ``lt``, ``le``; ``min_length`` of a
    list) and description. ``omit_default``: a setting added after runs were
    recorded, left out of a dump while at its default (``hrlsched.config``)."""
    meta = {k: v for k, v in (("gt", gt), ("ge", ge), ("lt", lt), ("le", le), ("min_length", min_length)) if v is not None}
    info = {"bounds": meta, "description": description, "omit_default": omit_default}
    if factory is not _MISSING:
        return dataclasses.field(default_factory=factory, metadata=info)
    return dataclasses.field(default=default, metadata=info)


def _join(loc: str, sub: str) -> str:
    return f"{loc}.{sub}" if loc and sub else loc or sub


class Settings:
    """Base of validated settings (see the module's docstring)."""

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        dataclasses.dataclass(kw_only=True)(cls)

    def __post_init__(self) -> None:
        errors: list[tuple[str, str, Any, bool]] = []
        for name, tp, bounds in _fields(type(self)):
            v = _convert(tp, getattr(self, name), name, errors)
            if v is not _BAD:
                _check_bounds(v, bounds, name, errors)
                object.__setattr__(self, name, v)
        if not errors:
            for hook in _hooks(type(self)):
                try:
                    hook(self)
                except ValueError as e:
                    errors.append(("", str(e), None, False))
                    break
        if errors:
            raise SchemaError(errors)

    @classmethod
    def validate(cls: type[_S], data: Any) -> _S:
        """These settings from parsed YAML or JSON (a mapping); ``SchemaError`` names every invalid field."""
        errors: list[tuple[str, str, Any, bool]] = []
        out = _convert(cls, data, "", errors)
        if errors:
            raise SchemaError(errors)
        return out  # type: ignore[no-any-return]

    def dump(self) -> dict[str, Any]:
        """Every field, in declaration order, nested settings as mappings (JSON- and YAML-ready)."""
        return {f.name: _dump(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]


def _dump(v: Any) -> Any:
    if isinstance(v, Settings):
        return v.dump()
    if isinstance(v, list | tuple):
        return [_dump(x) for x in v]
    if isinstance(v, dict):
        return {k: _dump(x) for k, x in v.items()}
    return v


def _fields(cls: type) -> list[tuple[str, Any, dict[str, Any]]]:
    out = _FIELDS.get(cls)
    if out is None:  # annotations are strings (postponed): evaluated once per class
        hints = typing.get_type_hints(cls)
        out = [(f.name, hints[f.name], f.metadata.get("bounds", {})) for f in dataclasses.fields(cls)]
        _FIELDS[cls] = out
    return out


def _hooks(cls: type) -> list[Any]:
    seen: list[Any] = []
    for klass in reversed(cls.__mro__):  # a base's checks first
        for name, fn in vars(klass).items():
            if name.startswith("_check") and callable(fn) and fn not in seen:
                seen.append(fn)
    return seen


def _check_bounds(v: Any, bounds: dict[str, Any], loc: str, errors: list[tuple[str, str, Any, bool]]) -> None:
    if v is None or not bounds:
        return
    for key, sym in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
        b = bounds.get(key)
        if b is not None and not {"gt": v > b, "ge": v >= b, "lt": v < b, "le": v <= b}[key]:
            errors.append((loc, f"expected a value {sym} {b:g}", v, True))
            return
    n = bounds.get("min_length")
    if n is not None and len(v) < n:
        errors.append((loc, f"expected at least {n} item{'s' * (n != 1)}", v, True))


def _kind_of(cls: Any) -> Any:
    """The ``kind`` tag of a settings class (its Literal field), or None."""
    if not (isinstance(cls, type) and issubclass(cls, Settings)):
        return None
    tp = dict((n, t) for n, t, _ in _fields(cls)).get("kind")
    return typing.get_args(tp)[0] if typing.get_origin(tp) is Literal else None


def _convert(tp: Any, v: Any, loc: str, errors: list[tuple[str, str, Any, bool]]) -> Any:
    """``v`` as type ``tp``, or ``_BAD`` with its errors appended."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return v
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if v is None and type(None) in args:
            return None
        rest = [a for a in args if a is not type(None)]
        kinds = [_kind_of(a) for a in rest]
        if len(rest) > 1 and all(k is not None for k in kinds):  # settings told apart by their kind
            kind = v.get("kind") if isinstance(v, dict) else getattr(v, "kind", None)
            if kind not in kinds:
                errors.append((_join(loc, "kind"), "expected one of " + ", ".join(repr(k) for k in kinds), kind, True))
                return _BAD
            return _convert(rest[kinds.index(kind)], v, loc, errors)
        for a in rest[:-1]:
            trial: list[tuple[str, str, Any, bool]] = []
            out = _convert(a, v, loc, trial)
            if not trial:
                return out
        return _convert(rest[-1], v, loc, errors)
    if origin is Literal:
        args = typing.get_args(tp)
        if any(v == a and type(v) is type(a) for a in args):
            return v
        errors.append((loc, "expected one of " + ", ".join(repr(a) for a in args), v, True))
        return _BAD
    if origin is list:
        if not isinstance(v, list | tuple):
            errors.append((loc, "expected a list", v, True))
            return _BAD
        (item,) = typing.get_args(tp)
        out_list = [_convert(item, x, _join(loc, str(i)), errors) for i, x in enumerate(v)]
        return _BAD if any(x is _BAD for x in out_list) else out_list
    if origin is dict:
        if not isinstance(v, dict):
            errors.append((loc, "expected a mapping", v, True))
            return _BAD
        _, val = typing.get_args(tp)
        out_dict: dict[str, Any] = {}
        for k, x in v.items():
            if not isinstance(k, str):
                errors.append((loc, "expected string keys", k, True))
                return _BAD
            out_dict[k] = _convert(val, x, _join(loc, k), errors)
        return _BAD if any(x is _BAD for x in out_dict.values()) else out_dict
    if isinstance(tp, type) and issubclass(tp, Settings):
        return _settings(tp, v, loc, errors)
    return _scalar(tp, v, loc, errors)


def _settings(cls: type, v: Any, loc: str, errors: list[tuple[str, str, Any, bool]]) -> Any:
    if isinstance(v, cls):
        return v  # validated when built
    if not isinstance(v, dict):
        errors.append((loc, "expected a mapping", v, not isinstance(v, Settings)))
        return _BAD
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    names = {f.name for f in fields}
    bad = False
    for k in v:
        if k not in names:
            errors.append((_join(loc, str(k)), f"unknown setting; expected one of {', '.join(sorted(names))}", v[k],
                           not isinstance(v[k], dict)))
            bad = True
    for f in fields:
        if f.name not in v and f.default is _MISSING and f.default_factory is _MISSING:
            errors.append((_join(loc, f.name), "required", None, False))
            bad = True
    if bad:  # the fields given are still checked, so that one run names every error
        for name, tp, bounds in _fields(cls):
            if name in v:
                x = _convert(tp, v[name], _join(loc, name), errors)
                if x is not _BAD:
                    _check_bounds(x, bounds, _join(loc, name), errors)
        return _BAD
    try:
        return cls(**v)
    except SchemaError as e:
        errors.extend((_join(loc, sub), msg, inp, show) for sub, msg, inp, show in e.errors)
        return _BAD


def _scalar(tp: Any, v: Any, loc: str, errors: list[tuple[str, str, Any, bool]]) -> Any:
    if tp is type(None):
        if v is None:
            return None
        errors.append((loc, "expected null", v, True))
        return _BAD
    if tp is bool:
        if isinstance(v, bool):
            return v
        errors.append((loc, "expected true or false", v, True))
        return _BAD
    if tp is str:
        if isinstance(v, str):
            return v
        errors.append((loc, "expected a string", v, True))
        return _BAD
    if tp is float:
        if isinstance(v, int | float) and not isinstance(v, bool):
            return float(v)
        if isinstance(v, str):
            try:
                return float(v)
            except ValueError:
                pass
        errors.append((loc, "expected a number", v, True))
        return _BAD
    if tp is int:
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, str):
            try:
                return int(v)
            except ValueError:
                pass
        errors.append((loc, "expected an integer", v, True))
        return _BAD
    raise TypeError(f"{loc}: settings of type {tp!r} are not supported")
