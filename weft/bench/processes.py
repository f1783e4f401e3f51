"""Across processes: N fresh processes per arm, order reversed each round.

Each process builds one arm (compiles are cached on disk, so this is quick after the
first), warms it up, times ``reps`` rounds and reports their median. Round ``r`` runs
the arms forward on even ``r`` and reversed on odd ``r``; two consecutive rounds form
one palindrome block, so the verdict rule applies unchanged. Run this module as a
program to be such a process (``python -m weft.bench.processes`` reads a JSON job on
stdin and writes a JSON answer on stdout).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from collections.abc import Callable

from weft.bench.arms import BenchError
from weft.bench.context import build_arm_runner, build_context
from weft.bench.driver import time_round
from weft.bench.schedule import process_round_order
from weft.bench.verdict import Block
from weft.ir import output_digest


def run_child(job: dict, timeout_s: float = 600.0) -> dict:
    completed = subprocess.run(
        [sys.executable, "-m", "weft.bench.processes"], input=json.dumps(job), capture_output=True, text=True,
        timeout=timeout_s,
    )
    if completed.returncode != 0:
        raise BenchError(f"benchmark process for arm {job['arm']} failed:\n{completed.stderr.strip()[-2000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def run_across_processes(
    job: dict, labels: list[str], processes: int, on_process: Callable[[], None] | None = None
) -> tuple[list[Block], list[dict]]:
    """``processes`` rounds (rounded up to even) of one fresh process per arm."""
    rounds = processes + processes % 2
    answers, per_round = [], []
    for round_index in range(rounds):
        order = process_round_order(labels, round_index)
        seconds = []
        for label in order:
            answer = run_child({**job, "arm": label})
            answers.append(answer)
            seconds.append(statistics.median(answer["seconds"]))
            if on_process:
                on_process()
        per_round.append((order, seconds))
    blocks = []
    for first, second in zip(per_round[::2], per_round[1::2], strict=False):
        blocks.append(Block(first[0] + second[0], tuple(first[1] + second[1])))
    return blocks, answers


def child_main() -> int:
    """Build one arm from the job on stdin, time it, print the rounds as JSON."""

    job = json.loads(sys.stdin.read())
    context = build_context(job["workload"], job["params"], job["seed"], job.get("stage"))
    runner = build_arm_runner(context, job["arm"], job["threads"], job["allow_test_arms"])
    for _ in range(job["warmup"]):
        time_round(runner.call, job["inner"])
    seconds = [time_round(runner.call, job["inner"]) for _ in range(job["reps"])]
    print(json.dumps({"arm": job["arm"], "seconds": seconds, "digest": output_digest(runner.outputs)}))
    return 0


if __name__ == "__main__":
    sys.exit(child_main())
