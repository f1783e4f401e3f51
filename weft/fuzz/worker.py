"""Programs run in a worker process, so a segfault or a trap in one is a finding, not the end.

The parent sends one JSON line per batch (settings and programs); the worker answers
one line of outcomes, prefixed by ``MARK`` (anything else on stdout is ignored). When
the worker dies (a signal) or goes quiet past the timeout (a hang), the parent starts a
new one and re-runs the batch's programs one at a time to find which did it.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from weft.fuzz.check import Outcome, Settings, check_batch
from weft.fuzz.program import Program, from_json, to_json

MARK = "@@weft-fuzz@@ "


def serve() -> None:
    """The worker's loop: read a batch, check it, answer."""
    answer = sys.stdout
    sys.stdout = sys.stderr  # whatever else prints must not corrupt the answers
    for line in sys.stdin:
        request = json.loads(line)
        settings = Settings(**request["settings"])
        programs = [from_json(text) for text in request["programs"]]
        outcomes = check_batch(programs, settings)
        answer.write(MARK + json.dumps([o.to_dict() for o in outcomes]) + "\n")
        answer.flush()


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


class Worker:
    """One worker process and a thread reading its answers."""

    def __init__(self) -> None:
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])  # the folder holding this weft package
        env["PYTHONPATH"] = os.pathsep.join([root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        self.stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "weft.fuzz.worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.stderr, text=True, env=env,
        )
        self.answers: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            if line.startswith(MARK):
                self.answers.put(line[len(MARK):])
        self.answers.put(None)

    def check(self, programs: list[Program], settings: Settings, timeout: float) -> list[Outcome] | str:
        """Outcomes, or why the worker gave none (it died, or hung past ``timeout`` seconds)."""
        request = {"settings": settings.__dict__, "programs": [to_json(p) for p in programs]}
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            answer = self.answers.get(timeout=timeout)
        except queue.Empty:
            self.close()
            return f"no answer within {timeout:.0f} s (a hang); worker killed"
        except BrokenPipeError:
            answer = None
        if answer is None:
            code = self.process.wait()
            self.stderr.seek(0)
            tail = self.stderr.read().decode(errors="replace")[-1500:]
            how = f"killed by {_signal_name(code)}" if code < 0 else f"exited with status {code}"
            return f"worker process {how}\n{tail}".rstrip()
        return [Outcome(**item) for item in json.loads(answer)]

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.stderr.close()


class Pool:
    """Keeps one live worker; checks batches and attributes whole-batch failures."""

    def __init__(self, settings: Settings, timeout: float = 300.0) -> None:
        self.settings = settings
        self.timeout = timeout
        self.worker: Worker | None = None

    def _worker(self) -> Worker:
        if self.worker is None or not self.worker.alive():
            if self.worker is not None:
                self.worker.close()
            self.worker = Worker()
        return self.worker

    def check(self, programs: list[Program]) -> list[Outcome]:
        result = self._worker().check(programs, self.settings, self.timeout * len(programs) ** 0.5)
        if isinstance(result, list) and not any(o.status == "batch" for o in result):
            return result
        if len(programs) == 1:
            return [Outcome("crash", result, "process")] if isinstance(result, str) else result
        return [self.check([program])[0] for program in programs]

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None


if __name__ == "__main__":
    serve()
