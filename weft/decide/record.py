"""The decision record: every region verdict, kept in SQLite so a warm compile reuses it.

One row per (region signature, context, contract, threads, machine profile id, deciding
code, compiler). ``context`` is the digest of the cache levels the plan leaves the
region's buffers at (the pricer's homes): the same signature at other distances is
another decision. ``deciding`` is Weft's version plus a hash of the source that decides
(``weft/cost``, ``weft/decide``, ``weft/compose/priced.py``): change the model and every
old verdict stops matching, without being deleted.

A row holds the choice (``fused``, ``unfused`` or a library body), the tiling, the
predicted prices and, when raced, the timings and their spread. Rows are written with
``INSERT OR IGNORE`` and read back: when several processes decide the same signature
at once, the first row written is the verdict every one of them uses, so they all
compile the same plan.

The database lives at ``WEFT_CACHE_DIR/decisions.sqlite`` in WAL mode with a busy
timeout. A file that is not a decision record (corrupt, or another program's) is moved
aside (``.corrupt-<time>``) and rebuilt, with a ``RecordWarning``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sqlite3
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

from weft.errors import WeftError
from weft.files import write_atomic

DB_NAME = "decisions.sqlite"
APPLICATION_ID = 0x57454654  # "WEFT": a database without it is not ours
SCHEMA = 2  # 2: the library bodies admitted, with their prices
BUSY_TIMEOUT_MS = 30_000
KEY_COLUMNS = ("signature", "context", "contract", "threads", "profile_id", "deciding", "compiler")


class RecordWarning(UserWarning):
    """The decision record was unreadable or foreign and has been moved aside and rebuilt."""


class RecordError(WeftError):
    """A decision record operation was given something it cannot use (e.g. an import file)."""


@dataclass(frozen=True, slots=True)
class RecordKey:
    signature: str
    context: str
    contract: str
    threads: int
    profile_id: str
    deciding: str
    compiler: str


@dataclass(frozen=True, slots=True)
class Decision:
    """One recorded verdict (see module doc). ``race`` holds, when raced, the medians in
    seconds per contender, each contender's rounds, the spread and the outcome."""

    key: RecordKey
    choice: str  # fused | unfused | library:<body>
    source: str  # model | race
    status: str  # the pricer's status: priced | bound | unlowerable
    form: str = ""
    tiling: tuple[tuple[str, int], ...] = ()
    unfused_cycles: float | None = None
    fused_cycles: float | None = None
    reason: str = ""
    race: dict = field(default_factory=dict)
    created: float = 0.0
    bodies: dict = field(default_factory=dict)  # library body admitted -> its price in cycles

    @property
    def margin(self) -> float:
        if self.fused_cycles is None or not self.unfused_cycles:
            return 0.0
        return (self.unfused_cycles - self.fused_cycles) / self.unfused_cycles

    def to_row(self) -> dict:
        row = asdict(self.key)
        row.update(choice=self.choice, source=self.source, status=self.status, form=self.form,
                   tiling=json.dumps([list(item) for item in self.tiling]), unfused_cycles=self.unfused_cycles,
                   fused_cycles=self.fused_cycles, reason=self.reason, race=json.dumps(self.race, sort_keys=True),
                   created=self.created or time.time(), bodies=json.dumps(self.bodies, sort_keys=True))
        return row

    @classmethod
    def from_row(cls, row: dict) -> Decision:
        key = RecordKey(**{name: row[name] for name in KEY_COLUMNS})
        return cls(key, row["choice"], row["source"], row["status"], row["form"],
                   tuple((axis, int(size)) for axis, size in json.loads(row["tiling"])), row["unfused_cycles"],
                   row["fused_cycles"], row["reason"], json.loads(row["race"]), row["created"],
                   json.loads(row.get("bodies") or "{}"))


_COLUMNS = (*KEY_COLUMNS, "choice", "source", "status", "form", "tiling", "unfused_cycles", "fused_cycles",
            "reason", "race", "created", "bodies")
_CREATE = f"""
CREATE TABLE IF NOT EXISTS decisions (
    signature TEXT NOT NULL, context TEXT NOT NULL, contract TEXT NOT NULL, threads INTEGER NOT NULL,
    profile_id TEXT NOT NULL, deciding TEXT NOT NULL, compiler TEXT NOT NULL,
    choice TEXT NOT NULL, source TEXT NOT NULL, status TEXT NOT NULL, form TEXT NOT NULL, tiling TEXT NOT NULL,
    unfused_cycles REAL, fused_cycles REAL, reason TEXT NOT NULL, race TEXT NOT NULL, created REAL NOT NULL,
    bodies TEXT NOT NULL DEFAULT '{{}}',
    PRIMARY KEY ({", ".join(KEY_COLUMNS)})
)"""


@functools.lru_cache(maxsize=1)
def deciding_code() -> str:
    """Weft's version plus a digest of the source that decides (see module doc)."""
    from weft.version import __version__

    root = Path(__file__).resolve().parent.parent
    files = sorted((*(root / "cost").rglob("*.py"), *(root / "decide").rglob("*.py"), root / "compose" / "priced.py"))
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return f"{__version__}+{digest.hexdigest()[:16]}"


class DecisionRecord:
    """The SQLite decision record at ``path`` (see module doc). Safe to share between
    processes: every write is one transaction; readers never block the writer (WAL)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.connection = self._open_or_rebuild()

    @classmethod
    def in_cache(cls, cache_dir: Path) -> DecisionRecord:
        return cls(Path(cache_dir) / DB_NAME)

    # ------------------------------------------------------------------ opening

    def _open_or_rebuild(self) -> sqlite3.Connection:
        try:
            return self._open()
        except (sqlite3.DatabaseError, _Foreign) as problem:
            aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
            for suffix in ("", "-wal", "-shm"):
                source = Path(str(self.path) + suffix)
                if source.exists():
                    try:
                        os.replace(source, Path(str(aside) + suffix))
                    except FileNotFoundError:  # another process moved it first
                        pass
            warnings.warn(f"decision record {self.path} was unusable ({problem}); moved aside to {aside.name} "
                          "and rebuilt (verdicts will be decided again)", RecordWarning, stacklevel=3)
            return self._open()

    def _open(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        try:
            connection.row_factory = sqlite3.Row
            connection.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            application_id = connection.execute("PRAGMA application_id").fetchone()[0]
            tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if application_id not in (0, APPLICATION_ID) or (application_id == 0 and tables):
                raise _Foreign(f"application id {application_id:#x} and tables {sorted(tables)} are not Weft's")
            if connection.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("quick_check failed")
            if connection.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("BEGIN IMMEDIATE")
            try:
                connection.execute(_CREATE)
                connection.execute(f"PRAGMA application_id={APPLICATION_ID}")
                connection.execute(f"PRAGMA user_version={SCHEMA}")
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            if version != SCHEMA:
                raise _Foreign(f"schema {version}, expected {SCHEMA}")
            columns = [row[1] for row in connection.execute("PRAGMA table_info(decisions)")]
            if tuple(columns) != _COLUMNS:
                raise _Foreign(f"columns {columns} are not a decision record's")
        except BaseException:
            connection.close()
            raise
        return connection

    def close(self) -> None:
        self.connection.close()

    # ------------------------------------------------------------------ reading and writing

    def get(self, key: RecordKey) -> Decision | None:
        where = " AND ".join(f"{name} = ?" for name in KEY_COLUMNS)
        row = self.connection.execute(f"SELECT * FROM decisions WHERE {where}", tuple(asdict(key).values())).fetchone()
        return None if row is None else Decision.from_row(dict(row))

    def put(self, decision: Decision) -> Decision:
        """Write ``decision`` unless its key is recorded already; returns the recorded one
        (another process's, if it wrote first)."""
        self.put_many([decision])
        return self.get(decision.key) or decision

    def put_many(self, decisions, replace: bool = False) -> int:
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        rows = [decision.to_row() for decision in decisions]
        if not rows:
            return 0
        statement = f"{verb} INTO decisions ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"
        connection = self.connection
        connection.execute("BEGIN IMMEDIATE")
        try:
            before = connection.total_changes
            connection.executemany(statement, [tuple(row[name] for name in _COLUMNS) for row in rows])
            written = connection.total_changes - before
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        return written

    def all(self, signature_prefix: str = "") -> list[Decision]:
        rows = self.connection.execute(
            "SELECT * FROM decisions WHERE signature LIKE ? ORDER BY signature, threads, created",
            (signature_prefix + "%",),
        )
        return [Decision.from_row(dict(row)) for row in rows]

    def clear(self) -> int:
        connection = self.connection
        connection.execute("BEGIN IMMEDIATE")
        count = connection.execute("DELETE FROM decisions").rowcount
        connection.execute("COMMIT")
        return count

    def integrity(self) -> str:
        return self.connection.execute("PRAGMA integrity_check").fetchone()[0]

    # ------------------------------------------------------------------ sharing between machines

    def export(self, path: Path) -> int:
        decisions = self.all()
        payload = {"format": "weft-decisions", "schema": SCHEMA, "rows": [d.to_row() for d in decisions]}
        write_atomic(Path(path), json.dumps(payload, indent=1, sort_keys=True))
        return len(decisions)

    def import_file(self, path: Path, profile_id: str) -> tuple[int, int]:
        """(rows written, rows refused): rows of another machine profile are refused (a verdict
        timed or priced on other hardware does not hold here)."""
        try:
            payload = json.loads(Path(path).read_text())
        except (OSError, ValueError) as error:
            raise RecordError(f"cannot read decision export {path}: {error}; pass a file written by "
                              "`weft record export`") from None
        if not isinstance(payload, dict) or payload.get("format") != "weft-decisions" or payload.get("schema") != SCHEMA:
            raise RecordError(f"{path} is not a weft decision export of schema {SCHEMA}; "
                              "export it again with this Weft (`weft record export FILE`)")
        try:
            decisions = [Decision.from_row(row) for row in payload["rows"]]
        except (KeyError, TypeError, ValueError) as error:
            raise RecordError(f"{path}: a row is malformed ({error}); export it again") from None
        mine = [d for d in decisions if d.key.profile_id == profile_id]
        return self.put_many(mine), len(decisions) - len(mine)


class _Foreign(Exception):
    """The database is readable but is not a Weft decision record of this schema."""


def context_digest(homes: dict[str, int]) -> str:
    """The pricer's homes (buffer -> cache level) as a short, order-free digest."""
    text = json.dumps(sorted(homes.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:12]
