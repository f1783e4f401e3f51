"""Workload parameters from the command line: the one ``KEY=VALUE`` parser.

``weft plan``, ``weft explain``, ``weft bench`` and ``weft diagnose`` all read
workload parameters with it::

    parse_params(["tokens=2048", "eps=1e-5", "projection=true", "mode=x"])
    -> {"tokens": 2048, "eps": 1e-05, "projection": True, "mode": "x"}

A value is an int, else a float, else ``true``/``false``, else the text itself;
``Workload.resolve`` then checks each against its parameter's default type. Keys
are stripped, and ``-`` in a key reads as ``_`` (``head-dim`` is ``head_dim``).
"""

from __future__ import annotations

from weft.errors import WorkloadError


def parse_value(text: str) -> int | float | bool | str:
    """``"2048"`` -> 2048, ``"1e-5"`` -> 1e-05, ``"true"`` -> True, anything else -> the text."""
    text = text.strip()
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            continue
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text


def parse_setting(text: str, option: str = "--set") -> tuple[str, int | float | bool | str]:
    """``"tokens=256"`` -> ("tokens", 256); ``WorkloadError`` naming ``option`` if it is not KEY=VALUE."""
    key, sep, value = text.partition("=")
    key = key.strip().replace("-", "_")
    if not sep or not key or not value.strip():
        raise WorkloadError(f"{option} expects key=value (write KEY=VALUE, e.g. {option} tokens=2048), got {text!r}")
    return key, parse_value(value)


def parse_params(pairs: list[str] | tuple[str, ...] | None, option: str = "--set") -> dict:
    """Every ``KEY=VALUE`` of ``pairs`` parsed (``parse_setting``), later keys winning."""
    return dict(parse_setting(pair, option) for pair in pairs or ())
