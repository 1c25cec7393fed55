"""Running sweep points anywhere: one task per point, a content-addressed result cache, three executors.

A point is a :class:`Task`: its cache key, the model file's name, the compile options (model and output
paths are filled in on the worker) and whether the generated project is wanted. A worker runs
:func:`execute` with the task and the ONNX bytes: it writes the bytes to a private temporary folder,
plans the compile there (``compiler.plan_training``, the path of `poet compile`) and returns an
:class:`Outcome`, the numbers of one sweep.csv row and, on request, the project's files as one
deterministic ``.tar.gz`` archive. Nothing a worker does touches the driver's disk, so the same function
runs in a local process, on a Dask worker or in a Ray task.

The key (:func:`task_key`) is the SHA-256 of the ONNX bytes' hash, every compile option that can change
the output, the device profile's bytes and the poet-edge version with a fingerprint of the code that
generates (the package, runtime_c/, targets/, profiles/). :class:`ResultCache` stores outcomes under
that key as they arrive on the driver (``<root>/<key[:2]>/<key>.json`` and ``.tar.gz``, each written
to a temporary name and renamed), so an interrupted sweep resumes where it stopped and a repeated sweep
does no solving. Deterministic errors (a budget below the floor) are cached like results; internal
errors, lost workers and phase time-outs are not.

Executors (:func:`open_executor`): ``local`` (worker processes, or this process with one job), ``dask``
(``distributed.Client`` on ``--address``, else a ``LocalCluster`` of ``jobs`` single-threaded worker
processes) and ``ray`` (``ray.init(address)``, else a local instance with ``jobs`` CPUs). Dask and Ray
are optional: importing this module needs neither.
"""

from __future__ import annotations

import enum
import gzip
import hashlib
import io
import json
import logging
import os
import tarfile
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, fields, is_dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any, Protocol

from poet_edge import __version__
from poet_edge.compiler import CompileOptions, Renderer, plan_training, project_files
from poet_edge.errors import PoetError
from poet_edge.paths import PROFILES, RUNTIME_C, TARGETS

EXECUTORS = ("local", "dask", "ray")
PACKAGE = Path(__file__).resolve().parent
ARCHIVE_SUFFIX = ".tar.gz"
NOT_CACHED_PREFIXES = ("internal error:", "compile stopped in the", "lost:", "code mismatch:")


# ---- the task -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    """One point, as a worker receives it (with the ONNX bytes as a separate argument)."""

    key: str
    model_name: str  # the file name plan.json records
    opts: CompileOptions  # model and out are replaced on the worker
    report: bool = True  # report.html and memory.png in the project
    project: bool = True  # return the generated project as an archive


@dataclass(frozen=True)
class Outcome:
    """What one point produced: a sweep.csv row's numbers, and the project archive when requested."""

    key: str
    status: str  # "ok" or the error text
    peak_ram_bytes: int | None = None
    energy_j: float | None = None
    latency_s: float | None = None
    recomputations: int | None = None
    page_outs: int | None = None
    arena_bytes: int | None = None
    archive: bytes | None = None  # the project's files (pack / unpack), or None
    code: str = ""  # the worker's poet-edge version and code fingerprint
    seconds: float = 0.0  # the worker's wall time for the point (not part of any output)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def cacheable(self) -> bool:
        """Deterministic results only: not bugs, lost workers, time-outs or foreign code."""
        return not self.status.startswith(NOT_CACHED_PREFIXES)


SUMMARY_FIELDS = tuple(f.name for f in fields(Outcome) if f.name not in ("key", "archive", "code", "seconds"))


@cache
def code_fingerprint() -> str:
    """``<version>+<sha256 prefix>`` of every file that shapes a compile's output (the package's sources,
    runtime_c/, targets/, profiles/). Two installs of the same code give the same value."""
    h = hashlib.sha256()
    for root in (PACKAGE, RUNTIME_C, TARGETS, PROFILES):
        if not root.is_dir():
            continue
        for p in sorted(root.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo"):
                h.update(f"{root.name}/{p.relative_to(root).as_posix()}\0".encode())
                h.update(hashlib.sha256(p.read_bytes()).digest())
    return f"{__version__}+{h.hexdigest()[:16]}"


def _canonical(v: object) -> object:
    """JSON-able and stable: dataclasses as their compared fields, enums as values, floats as repr."""
    if is_dataclass(v) and not isinstance(v, type):
        return {f.name: _canonical(getattr(v, f.name)) for f in fields(v) if f.compare}
    if isinstance(v, enum.Enum):
        return _canonical(v.value)
    if isinstance(v, Path):
        return str(v)
    if isinstance(v, (tuple, list)):
        return [_canonical(x) for x in v]
    if isinstance(v, float):
        return repr(v)
    if v is None or isinstance(v, (str, int, bool)):
        return v
    raise TypeError(f"cannot key a {type(v).__name__}")


def device_bytes(device: str) -> str:
    """The SHA-256 of the device profile's file (a name or a TOML path; unreadable: the name alone)."""
    from poet_edge.profiles import resolve_profile

    try:
        return hashlib.sha256(resolve_profile(device).read_bytes()).hexdigest()
    except (PoetError, OSError):
        return ""


def task_key(model_sha256: str, model_name: str, opts: CompileOptions, report: bool) -> str:
    """The cache key of a point (see the module docstring); ``opts.model`` and ``opts.out`` do not count."""
    options = _canonical(replace(opts, model=Path(), out=Path()))
    assert isinstance(options, dict)
    del options["model"], options["out"]
    doc = {
        "poet_edge": code_fingerprint(),
        "model_sha256": model_sha256,
        "model_name": model_name,
        "options": options,
        "device_sha256": device_bytes(opts.device),
        "report": report,
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


# ---- the worker side ------------------------------------------------------------------------------------


def execute(task: Task, model: bytes) -> Outcome:
    """Runs one point (on any worker): plans the compile of ``model`` in a private temporary folder;
    every error becomes the outcome's status, never an exception."""
    start = time.perf_counter()
    base = Outcome(task.key, "ok", code=code_fingerprint())
    renderers: tuple[Renderer, ...] = ()
    if task.report and task.project:
        from poet_edge.report import render

        renderers = (render,)
    with tempfile.TemporaryDirectory(prefix="poet-sweep-") as tmp:
        path = Path(tmp) / task.model_name
        path.write_bytes(model)
        opts = replace(task.opts, model=path, out=Path(tmp) / "out")
        try:
            c = plan_training(opts)
            archive = pack(project_files(opts, c, renderers)) if task.project else None
        except PoetError as e:
            return replace(base, status=str(e), seconds=time.perf_counter() - start)
        except Exception as e:  # noqa: BLE001 - a sweep reports every point; the text says it is a bug
            text = f"internal error: {type(e).__name__}: {e}"
            return replace(base, status=text, seconds=time.perf_counter() - start)
    return replace(
        base,
        peak_ram_bytes=c.predicted_ram_bytes,
        energy_j=c.sim.energy_j,
        latency_s=c.sim.latency_s,
        recomputations=c.sim.n_recomputations,
        page_outs=c.sim.n_page_outs,
        arena_bytes=c.arena.arena_bytes,
        archive=archive,
        seconds=time.perf_counter() - start,
    )


def pack(files: Mapping[str, str | bytes | Path]) -> bytes:
    """The project's files as a .tar.gz whose bytes depend on the files alone (sorted, no times or owners)."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, compresslevel=6) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            for rel in sorted(files):
                content = files[rel]
                data = (
                    content.read_bytes()
                    if isinstance(content, Path)
                    else content
                    if isinstance(content, bytes)
                    else content.encode()
                )
                info = tarfile.TarInfo(rel)
                info.size, info.mode, info.mtime = len(data), 0o644, 0
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def unpack(archive: bytes) -> dict[str, bytes]:
    """The files of a :func:`pack` archive; anything but plain files under relative paths is an error."""
    out: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            for m in tar.getmembers():
                parts = Path(m.name).parts
                if not m.isfile() or m.name.startswith("/") or ".." in parts or not parts:
                    raise PoetError(f"project archive: unexpected entry {m.name!r}")
                f = tar.extractfile(m)
                assert f is not None
                out[m.name] = f.read()
    except (tarfile.TarError, OSError, EOFError) as e:
        raise PoetError(f"project archive: unreadable ({e})") from None
    return out


# ---- the cache ----------------------------------------------------------------------------------------


def default_cache_dir() -> Path | None:
    """$POET_CACHE_DIR/sweep, else ~/.cache/poet-edge/sweep ($XDG_CACHE_HOME honoured); POET_CACHE_DIR set
    to an empty string turns it off (as for the build cache)."""
    env = os.environ.get("POET_CACHE_DIR")
    if env is not None:
        return Path(env) / "sweep" if env else None
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "poet-edge" / "sweep"


@dataclass(frozen=True)
class ResultCache:
    """Outcomes by key on disk (``root`` None: a cache that holds nothing)."""

    root: Path | None

    def _path(self, key: str, suffix: str) -> Path:
        assert self.root is not None
        return self.root / key[:2] / f"{key}{suffix}"

    def get(self, key: str, need_archive: bool) -> Outcome | None:
        """The stored outcome of ``key``; None when absent, unreadable, or without the wanted archive."""
        if self.root is None:
            return None
        try:
            doc = json.loads(self._path(key, ".json").read_text())
            has_archive = bool(doc.pop("archive"))
            summary = {k: doc[k] for k in SUMMARY_FIELDS}
            archive = self._path(key, ARCHIVE_SUFFIX).read_bytes() if has_archive and need_archive else None
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if need_archive and summary["status"] == "ok" and archive is None:
            return None
        return Outcome(key, **summary, archive=archive, code=code_fingerprint())

    def put(self, o: Outcome) -> None:
        """Stores a cacheable outcome: the archive first, then the summary that points at it."""
        if self.root is None or not o.cacheable:
            return
        doc = {k: getattr(o, k) for k in SUMMARY_FIELDS}
        doc["archive"] = o.archive is not None
        if o.archive is None and self._path(o.key, ".json").is_file():
            old = self.get(o.key, need_archive=True)
            if old is not None and old.archive is not None:
                return  # keep the richer entry
        if o.archive is not None:
            _write_atomic(self._path(o.key, ARCHIVE_SUFFIX), o.archive)
        _write_atomic(self._path(o.key, ".json"), (json.dumps(doc, sort_keys=True) + "\n").encode())


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# ---- executors ----------------------------------------------------------------------------------------

Done = Callable[[Task, Outcome], None]


class Executor(Protocol):
    name: str

    @property
    def workers(self) -> int:
        """Tasks that can run at once."""
        ...

    def run(self, tasks: Sequence[Task], models: Mapping[str, bytes], done: Done) -> None:
        """Runs every task (``models``: model_name -> ONNX bytes) and calls ``done`` on this thread as
        each finishes; a task that raises or whose worker is lost is an outcome with that error."""
        ...

    def close(self) -> None: ...


def _lost(task: Task, e: BaseException) -> Outcome:
    return Outcome(task.key, f"lost: the worker failed ({type(e).__name__}: {e})")


@dataclass
class LocalExecutor:
    """Worker processes of this machine (``jobs`` 1: this process)."""

    jobs: int
    name: str = "local"

    @property
    def workers(self) -> int:
        return self.jobs

    def run(self, tasks: Sequence[Task], models: Mapping[str, bytes], done: Done) -> None:
        if self.jobs == 1 or len(tasks) <= 1:
            for t in tasks:
                done(t, execute(t, models[t.model_name]))
            return
        pool = ProcessPoolExecutor(max_workers=min(self.jobs, len(tasks)))
        try:
            futures: dict[Future[Outcome], Task] = {
                pool.submit(execute, t, models[t.model_name]): t for t in tasks
            }
            for f in as_completed(futures):
                try:
                    o = f.result()
                except Exception as e:  # noqa: BLE001 - a broken pool: every point left says so
                    o = _lost(futures[f], e)
                done(futures[f], o)
        except BaseException:  # an error or a signal (cli.Interrupted): the workers stop now
            for worker in list((getattr(pool, "_processes", None) or {}).values()):
                worker.terminate()  # SIGTERM: a forked worker runs its cleanup (cli's handler) and exits
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def close(self) -> None:
        pass


def _need(module: str, extra: str) -> None:
    raise PoetError(
        f"--executor {extra} needs the {module} package, which is not installed: "
        f"pip install 'poet-edge[{extra}]' (or pip install {module})"
    )


def _here_on_path() -> str:
    """A PYTHONPATH that makes a locally started worker import this very poet_edge."""
    parts = [str(PACKAGE.parent), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return os.pathsep.join(dict.fromkeys(parts))


class DaskExecutor:
    """A ``distributed`` client: of the scheduler at ``address``, else of a LocalCluster of ``jobs``
    single-threaded worker processes started (and stopped) here."""

    name = "dask"

    def __init__(self, address: str | None, jobs: int) -> None:
        try:
            import distributed
        except ImportError:
            _need("distributed", "dask")
        self._cluster: Any = None
        try:
            if address:
                self._client: Any = distributed.Client(address, timeout="30s")
            else:
                os.environ["PYTHONPATH"] = _here_on_path()  # the workers import the driver's poet_edge
                self._cluster = distributed.LocalCluster(
                    n_workers=jobs,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=":0",  # any free port: never clash with another cluster
                    silence_logs=logging.CRITICAL,  # shutdown chatter; a failed point is a row
                )
                self._client = distributed.Client(self._cluster)
        except (OSError, TimeoutError) as e:
            self.close()
            raise PoetError(
                f"--executor dask: cannot connect to {address or 'a local cluster'}: {e}"
            ) from None
        info = self._client.scheduler_info()
        self.workers = max(1, sum(w.get("nthreads", 1) for w in info.get("workers", {}).values()))

    def run(self, tasks: Sequence[Task], models: Mapping[str, bytes], done: Done) -> None:
        import distributed

        refs = {name: self._client.scatter(data, broadcast=True, hash=False) for name, data in models.items()}
        futures = {
            self._client.submit(execute, t, refs[t.model_name], pure=False, retries=0): t for t in tasks
        }
        try:
            for f in distributed.as_completed(futures):
                try:
                    o = f.result()
                except Exception as e:  # noqa: BLE001 - a killed worker, a failed deserialisation
                    o = _lost(futures[f], e)
                done(futures[f], o)
        except BaseException:
            self._client.cancel(list(futures), force=True)
            raise

    def close(self) -> None:
        for thing in (getattr(self, "_client", None), self._cluster):
            if thing is not None:
                try:
                    thing.close()
                except Exception:  # noqa: BLE001, S110 - shutting down; nothing left to report to
                    pass


class RayExecutor:
    """Ray tasks of one CPU each: on the cluster at ``address`` (``auto``, ``ray://host:10001``), else in a
    local instance with ``jobs`` CPUs started (and stopped) here."""

    name = "ray"

    def __init__(self, address: str | None, jobs: int) -> None:
        try:
            import ray
        except ImportError:
            _need("ray", "ray")
        kwargs: dict[str, Any] = {
            "log_to_driver": False,
            "include_dashboard": False,
            "logging_level": logging.WARNING,
        }
        if address:
            kwargs["address"] = address
        else:  # "local": a new instance, even when another cluster runs on this machine
            kwargs["address"], kwargs["num_cpus"] = "local", jobs
            kwargs["runtime_env"] = {"env_vars": {"PYTHONPATH": _here_on_path()}}
        try:
            ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise PoetError(
                f"--executor ray: cannot start or reach {address or 'a local instance'}: {e}"
            ) from None
        self._remote = ray.remote(num_cpus=1, max_retries=0)(execute)
        self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))

    def run(self, tasks: Sequence[Task], models: Mapping[str, bytes], done: Done) -> None:
        import ray

        refs = {name: ray.put(data) for name, data in models.items()}
        pending = {self._remote.remote(t, refs[t.model_name]): t for t in tasks}
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for r in ready:
                    t = pending.pop(r)
                    try:
                        o = ray.get(r)
                    except Exception as e:  # noqa: BLE001 - a dead worker or node
                        o = _lost(t, e)
                    done(t, o)
        except BaseException:
            for r in pending:
                ray.cancel(r, force=True)
            raise

    def close(self) -> None:
        import ray

        ray.shutdown()


def open_executor(name: str, address: str | None, jobs: int) -> Executor:
    if name == "local":
        if address:
            raise PoetError("--address is for --executor dask or ray; the local executor uses this machine")
        return LocalExecutor(jobs)
    if name == "dask":
        return DaskExecutor(address, jobs)
    if name == "ray":
        return RayExecutor(address, jobs)
    raise PoetError(f"unknown executor '{name}'; use one of {', '.join(EXECUTORS)}")


def check_code(o: Outcome) -> Outcome:
    """An outcome from a worker running other poet-edge code than this driver is an error, not a result
    (the cache key names this driver's code)."""
    here = code_fingerprint()
    if o.code and o.code != here:
        return Outcome(
            o.key,
            f"code mismatch: the worker runs poet-edge {o.code}, this driver {here}; install the same "
            "poet-edge on the workers",
        )
    return o


def summary(o: Outcome) -> dict[str, Any]:
    """The row numbers of an outcome (for tests and JSON)."""
    d = asdict(o)
    return {k: d[k] for k in SUMMARY_FIELDS}
