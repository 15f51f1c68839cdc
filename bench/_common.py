"""Helpers shared by the quality benchmarks: seed aggregation and markdown tables."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import json
import logging
import math
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import yaml

from domains import CurriculumError

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Stat:
    """Mean and sample standard deviation over seeds (NaN values are left out and counted)."""

    mean: float
    sd: float
    n: int  # number of finite values
    of: int  # number of values given

    @classmethod
    def of_values(cls, values: Sequence[float | None]) -> Stat:
        arr = np.array([math.nan if v is None else v for v in values], dtype=np.float64)
        ok = arr[np.isfinite(arr)]
        mean = float(ok.mean()) if ok.size else math.nan
        sd = float(ok.std(ddof=1)) if ok.size > 1 else 0.0
        return cls(mean=mean, sd=sd, n=int(ok.size), of=int(arr.size))

    def fmt(self, digits: int = 3, *, integer: bool = False) -> str:
        """``0.512 ± 0.010``; ``—`` when no seed has a value; ``(k/n)`` when only some do."""
        if self.n == 0:
            return "—"
        if integer:
            text = f"{self.mean:,.0f} ± {self.sd:,.0f}"
        else:
            text = f"{self.mean:.{digits}f} ± {self.sd:.{digits}f}"
        return text if self.n == self.of else f"{text} ({self.n}/{self.of})"


def steps_to(curve_steps: npt.ArrayLike, curve: npt.ArrayLike, target: float) -> int | None:
    """First step at which ``curve`` reaches ``target`` (None if it never does)."""
    values = np.asarray(curve, dtype=np.float64)
    hit = np.flatnonzero(values >= target - 1e-12)
    return int(np.asarray(curve_steps)[hit[0]]) if hit.size else None


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub markdown table; the first column is left-aligned, the rest right-aligned."""
    align = [":---"] + ["---:"] * (len(header) - 1)
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def machine() -> str:
    """One line naming the machine and the date, for the docs."""
    try:
        cpu = subprocess.run(
            ["nproc"], capture_output=True, text=True, check=False, timeout=5
        ).stdout.strip()
    except OSError:
        cpu = "?"
    return (
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.machine()}, "
        f"{cpu} CPU cores, Python {platform.python_version()}"
    )


class BenchError(CurriculumError):
    """Bad benchmark arguments: names the flag and what would be right."""


def policy_options(items: Sequence[str], known: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``--option POLICY.FIELD=VALUE`` flags -> ``{policy: {field: value}}``."""
    options: dict[str, dict[str, Any]] = {}
    for key, value in parse_assignments("--option", items).items():
        policy, _, field = key.partition(".")
        if not field or policy not in known:
            raise BenchError(f"--option {key}: expected POLICY.FIELD with POLICY in {list(known)}")
        options.setdefault(policy, {})[field] = value
    return options


def run_main(
    main: Callable[[argparse.Namespace], int], args: argparse.Namespace, log: logging.Logger
) -> int:
    """Set up logging (``-v``), run a benchmark's main, and turn a CurriculumError into one
    line on stderr and exit code 2."""
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    log.setLevel(logging.INFO if args.verbose else logging.WARNING)
    try:
        return main(args)
    except CurriculumError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def parse_assignments(flag: str, items: Sequence[str]) -> dict[str, Any]:
    """``["a=1", "b.c=[1, 2]"]`` -> ``{"a": 1, "b.c": [1, 2]}``; values are YAML literals."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise BenchError(
                f"{flag} {item!r}: expected KEY=VALUE, e.g. {flag} learning_rate=0.002"
            )
        try:
            out[key.strip()] = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise BenchError(f"{flag} {item!r}: the value is not a YAML literal ({exc})") from None
    return out


def emit(
    text: str,
    *,
    out: Path | None,
    markdown: bool,
    setup: Any,
    results: Sequence[Any],
    elapsed: float,
    **extra: Any,
) -> None:
    """Print a results table (with a provenance comment for markdown) and save the JSON."""
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "machine": machine(),
            "argv": sys.argv,
            "setup": dataclasses.asdict(setup),
            "seconds": elapsed,
            **extra,
            "runs": [dataclasses.asdict(r) for r in results],
        }
        out.write_text(json.dumps(payload, indent=1, default=str))
    if markdown:
        print(f"<!-- {machine()}; {elapsed:.0f} s in all -->")
    print(text)


def set_constants(assignments: Sequence[str]) -> dict[str, Any]:
    """Set module constants of the code under test for this process: ``MODULE:NAME=VALUE``,
    VALUE a Python literal of the constant's own type (``policies._skill:_SLOPE_INFO_MIN=0.3``).
    A try measured before it becomes a setting, or is dropped, stays reproducible from the
    command line. ValueError names the assignment at fault; nothing is set then."""
    planned: list[tuple[Any, str, Any]] = []
    for item in assignments:
        target, sep, text = item.partition("=")
        module_name, colon, name = target.partition(":")
        if not sep or not colon or not module_name or not name:
            raise ValueError(f"{item!r}: expected MODULE:NAME=VALUE")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ValueError(f"{item!r}: no module {module_name!r} ({exc})") from None
        if not hasattr(module, name):
            raise ValueError(f"{item!r}: {module_name} has no constant {name!r}")
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise ValueError(f"{item!r}: {text!r} is not a Python literal") from None
        old = getattr(module, name)
        if type(value) is not type(old) and not (isinstance(old, float) and type(value) is int):
            raise ValueError(
                f"{item!r}: {module_name}.{name} is a {type(old).__name__}, "
                f"got a {type(value).__name__}"
            )
        planned.append((module, name, type(old)(value)))
    for module, name, value in planned:
        setattr(module, name, value)
    return {f"{m.__name__}:{n}": v for m, n, v in planned}


def run_all(
    fn: Callable[[Any], Any], tasks: Sequence[Any], jobs: int, constants: Sequence[str]
) -> list[Any]:
    """``fn`` of every task, in order: in ``jobs`` worker processes (each with the
    ``--set-constant`` assignments ``constants`` set first) or, at one job, here."""
    if jobs <= 1:
        return [fn(task) for task in tasks]
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(
        max_workers=jobs, initializer=set_constants, initargs=(constants,)
    ) as pool:
        return list(pool.map(fn, tasks, chunksize=1))
