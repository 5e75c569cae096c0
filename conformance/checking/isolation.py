"""Process isolation: run a backend in a child process so that a crash or a hang
costs one case, not the run.

:class:`IsolatedBackend` wraps any backend that can be loaded again by its locator
(a short name, ``module:Class`` or an entry point). It looks like a Backend to the
runner; every compile and run is a request to a child process that holds the real
backend. If the child dies (abort, segfault, ``os._exit``) the request raises
:class:`BackendCrash`; if it does not answer in time the child is killed and the
request raises :class:`BackendTimeout`. Either way the next request starts a fresh
child. Executables are cached in the child, so isolation keeps "one compile per
signature" as long as the child lives.
"""
from __future__ import annotations

import json
import multiprocessing
import re
import traceback
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from conformance.backends.base import (Backend, BackendLoadError, CannotPack, NoProgram,
                                       Unsupported)
from conformance.core.case import Case, Signature


#: What a child's stderr says when its heap is corrupt (glibc malloc checks, ASan).
HEAP_CORRUPTION = re.compile(
    r"corrupted (?:size|double-linked|top size|unsorted chunks)|double free or corruption|"
    r"free\(\): invalid|malloc\(\): |munmap_chunk\(\): invalid|realloc\(\): invalid|"
    r"heap-buffer-overflow|heap-use-after-free|AddressSanitizer|heap corruption", re.I)


class BackendCrash(Exception):
    """The backend's process died while handling a request."""


class BackendTimeout(Exception):
    """The backend did not answer within the time limit (its process was killed)."""


class BackendFailure(Exception):
    """An exception the backend raised in its process (the program was rejected)."""


def _serve(conn, locator: str, log_path: str | None = None) -> None:
    """The child process: load the backend, answer requests until told to stop.

    With ``log_path``, the child's stderr (where native code prints its last words
    before an abort) goes to that file instead of the terminal."""
    import os
    if log_path:
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 2)
        os.close(fd)
    # Collectives (issue 18) run on a grid of up to 8 processes, one host device each
    # (XLA reads the flag when it starts; nothing has started it here yet)
    from conformance.backends.jaxlib_support import ask_for_host_devices
    ask_for_host_devices()
    from conformance.backends import get_backend
    try:
        backend = get_backend(locator)
        conn.send(("ok", backend.describe(), backend.can_pack,
                   getattr(backend, "compiles_invalid", True),
                   getattr(backend, "pack_refusal", None),
                   getattr(backend, "pack_kind", "own")))
    except Exception as e:  # noqa: BLE001 - reported to the parent
        conn.send(("load_error", f"{type(e).__name__}: {e}"))
        return
    packs: dict = {}        # tuple of signatures -> compiled pack
    programs: dict = {}     # program JSON text -> compiled program (conformance check)
    while True:
        try:
            request, sig, payload = conn.recv()
        except EOFError:
            return
        if request == "stop":
            return
        try:
            if request in ("compile_pack", "run_pack"):     # conformance.checking.packing
                sigs, batches = payload
                pack = packs.get(sigs)
                if pack is None:
                    pack = packs[sigs] = backend.compile_pack(list(sigs))
                result = None if request == "compile_pack" else \
                    [None if r is None else [np.asarray(x) for x in r] for r in pack(batches)]
                conn.send(("ok", result))
                continue
            if request in ("compile_program", "run_program"):  # payload: (JSON, inputs)
                key, inputs = payload
                exe = programs.get(key)
                if exe is None:
                    from conformance.backends.programs import compile_program
                    from conformance.core.program import Program
                    exe = programs[key] = compile_program(
                        backend, Program.from_json(json.loads(key)))
                result = None if request == "compile_program" else \
                    [np.asarray(x) for x in exe(inputs)]
                conn.send(("ok", result))
                continue
            if request == "compile":
                (backend.batch_executable if payload else backend.executable)(sig)
                result: Any = None
            elif request == "run_batch":
                result = [np.asarray(x) for x in backend.batch_executable(sig)(payload)]
            elif request == "run_fresh":
                result = [np.asarray(x) for x in backend.fresh_batch_executable(sig)(payload)]
            elif request == "run":
                result = [np.asarray(x) for x in backend.executable(sig)(payload)]
            elif request == "clear":
                backend.clear_cache()
                packs.clear()
                programs.clear()
                result = None
            else:
                raise ValueError(f"unknown request {request!r}")
            conn.send(("ok", result))
        except Unsupported as e:
            conn.send(("unsupported", str(e), bool(getattr(e, "compiled", False)),
                       isinstance(e, NoProgram)))
        except CannotPack as e:         # the backend, not a member (backends/text_pack.py)
            conn.send(("cannot_pack", str(e)))
        except Exception as e:  # noqa: BLE001 - the backend rejected the program
            conn.send(("error", f"{type(e).__name__}: {e}",
                       "".join(traceback.format_exception_only(type(e), e)).strip()))


class IsolatedBackend(Backend):
    """A backend whose every compile and run happens in a child process."""

    isolate = True

    def __init__(self, locator: str, timeout: float = 60.0, log_path: str | None = None) -> None:
        super().__init__()
        self._locator = locator
        self.timeout = timeout
        self.log_path = log_path
        self._ctx = multiprocessing.get_context("spawn")     # jax is not fork-safe
        self._proc = None
        self._conn = None
        self._info: dict[str, Any] = {}
        self._log_mark = 0
        self.crashes = 0        # answers lost to the child dying or corrupting its heap
        self._start()
        self.name = self._info.get("name", locator)

    # -- the child -------------------------------------------------------------------
    def _start(self) -> None:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(target=_serve, args=(child, self._locator, self.log_path),
                                 daemon=True)
        proc.start()
        child.close()
        self._proc, self._conn = proc, parent
        reply = self._receive(timeout=max(self.timeout, 120.0), what="loading")
        status, info = reply[0], reply[1]
        if status != "ok":
            self.close()
            raise BackendLoadError(f"backend {self._locator!r}: {info}")
        self._info = info
        self._can_pack = bool(reply[2]) if len(reply) > 2 else False
        self.compiles_invalid = bool(reply[3]) if len(reply) > 3 else True
        self._child_refusal = reply[4] if len(reply) > 4 else (
            None if self._can_pack else "its process has no pack path")
        self._child_pack_kind = reply[5] if len(reply) > 5 else "own"

    def _receive(self, timeout: float, what: str):
        if not self._conn.poll(timeout):
            self._kill()
            raise BackendTimeout(f"no answer after {timeout:g} s while {what}; "
                                 "the backend's process was killed")
        try:
            return self._conn.recv()
        except (EOFError, OSError):
            code = self._exit_code()
            self._kill()
            self.crashes += 1
            raise BackendCrash(f"the backend's process died while {what} "
                               f"({_describe_exit(code)}){self._last_words()}") from None

    def _exit_code(self) -> int | None:
        if self._proc is None:
            return None
        self._proc.join(timeout=5)
        return self._proc.exitcode

    def _kill(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()
            self._proc.join(timeout=5)
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None

    def _last_words(self) -> str:
        """The first line the child wrote to its log since the current request began."""
        if not self.log_path:
            return ""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_mark)
                lines = [ln.strip() for ln in f.read(65536).decode(errors="replace").splitlines()]
        except OSError:
            return ""
        lines = [ln for ln in lines if ln]
        return (f": {lines[0][:300]}" if lines else "") + self._log_link()

    def _log_link(self) -> str:
        return f" (stderr log: {self.log_path})" if self.log_path else ""

    def _heap_corruption(self) -> str | None:
        """The first line the child wrote since the request began that reports heap
        corruption (glibc's malloc checks, AddressSanitizer), or None. A process whose
        heap is corrupt may still answer, wrongly, for many requests: none of its
        answers is trusted once it says so."""
        if not self.log_path:
            return None
        import os
        try:
            if os.path.getsize(self.log_path) <= self._log_mark:
                return None
            with open(self.log_path, "rb") as f:
                f.seek(self._log_mark)
                text = f.read(1 << 20).decode(errors="replace")
        except OSError:
            return None
        for line in text.splitlines():
            if HEAP_CORRUPTION.search(line):
                return line.strip()[:300]
        return None

    def _mark_log(self) -> None:
        import os
        try:
            self._log_mark = os.path.getsize(self.log_path) if self.log_path else 0
        except OSError:
            self._log_mark = 0

    def _request(self, request: str, sig: Signature, payload: Any = None) -> Any:
        if self._proc is None or not self._proc.is_alive():
            self._kill()
            self._start()
        self._mark_log()
        try:
            self._conn.send((request, sig, payload))
        except (BrokenPipeError, OSError):
            code = self._exit_code()
            self._kill()
            self.crashes += 1
            raise BackendCrash(f"the backend's process died ({_describe_exit(code)})"
                               f"{self._last_words()}") from None
        reply = self._receive(self.timeout, f"{'compiling' if request == 'compile' else 'running'}"
                                            f" {sig.op if sig is not None else request}")
        corrupt = self._heap_corruption()
        if corrupt is not None:
            self._kill()
            self.crashes += 1
            raise BackendCrash(f"the backend's process reported heap corruption ({corrupt}); "
                               "its answer and any later one are not trusted, so the process "
                               f"was restarted{self._log_link()}")
        status = reply[0]
        if status == "ok":
            return reply[1]
        if status == "unsupported":
            if len(reply) > 3 and reply[3]:
                raise NoProgram(reply[1])
            raise Unsupported(reply[1], compiled=bool(len(reply) > 2 and reply[2]))
        if status == "cannot_pack":
            raise CannotPack(reply[1])
        raise BackendFailure(reply[1])

    def close(self) -> None:
        if self._conn is not None and self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(("stop", None, None))
            except (BrokenPipeError, OSError):
                pass
            self._proc.join(timeout=5)
        self._kill()

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass

    # -- the Backend interface -------------------------------------------------------------
    @property
    def locator(self) -> str:
        return self._locator

    def describe(self) -> dict[str, Any]:
        return {**self._info, "isolated": True}

    def compile(self, signature: Signature):
        self._request("compile", signature, False)
        return lambda inputs: self._request("run", signature, [np.asarray(x) for x in inputs])

    def compile_batch(self, signature: Signature):
        self._request("compile", signature, True)
        return lambda stacked: self._request("run_batch", signature,
                                             [np.asarray(x) for x in stacked])

    def fresh_batch_executable(self, signature: Signature):
        """Compiled anew in the child (bypassing its cache) for each call."""
        return lambda stacked: self._request("run_fresh", signature,
                                             [np.asarray(x) for x in stacked])

    def run(self, case: Case) -> Sequence[np.ndarray]:
        return self.executable(case.signature)(case.inputs)

    @property
    def pack_refusal(self) -> str | None:
        """What the runner found (``refuse_packs``, held here: a child started anew
        knows nothing of it), else what the child's backend says."""
        return self.__dict__.get("_pack_refused") or getattr(self, "_child_refusal", None)

    @property
    def pack_kind(self) -> str:
        return "none" if self.pack_refusal else getattr(self, "_child_pack_kind", "own")

    def compile_pack(self, signatures: Sequence[Signature]):
        """Compiled in the child; each run sends the signatures along, so a child
        started anew (after another request crashed it) compiles the pack again."""
        sigs = tuple(signatures)
        self._request("compile_pack", None, (sigs, None))
        return lambda batches: self._request(
            "run_pack", None, (sigs, [None if b is None else [np.asarray(x) for x in b]
                                      for b in batches]))

    def compile_program(self, program):
        """A program (conformance.core.program) compiled and run in the child; each run
        sends the program along, so a child started anew compiles it again."""
        key = json.dumps(program.to_json(), sort_keys=True)
        self._request("compile_program", None, (key, None))
        return lambda inputs: self._request(
            "run_program", None, (key, [np.asarray(x) for x in inputs]))

    def clear_cache(self) -> None:
        """Also in the child, if it is running (a dead child holds nothing)."""
        super().clear_cache()
        if self._proc is not None and self._proc.is_alive():
            try:
                self._request("clear", None)
            except Exception:  # noqa: BLE001 - a child that fails here is restarted later
                self._kill()


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        import signal
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def isolated(backend: Backend, timeout: float = 60.0,
             log_path: str | None = None) -> IsolatedBackend:
    """Run ``backend`` (by its locator) in a child process; its stderr to ``log_path``."""
    if isinstance(backend, IsolatedBackend):
        return backend
    locator = backend.locator
    if locator.startswith("__main__:"):
        raise BackendLoadError(f"backend {backend.name!r} is defined in __main__; it cannot "
                               "be isolated: give it as module:Class")
    return IsolatedBackend(locator, timeout, log_path)


def prepare_backends(backends: Sequence[Backend], out: "str | Path", isolate: bool | None,
                     timeout: float) -> list[Backend]:
    """Wrap the backends that must run in a child process (``isolate`` True, or, with
    ``isolate`` None, every backend whose class does not say ``isolate = False``: the
    StableHLO interpreter and XLA ask for it, and a vendor class is isolated unless it
    opts out); each child's stderr goes to ``out/<name>.stderr.log``."""
    result = []
    for b in backends:
        wanted = isolate if isolate is not None else (b.isolate is not False)
        if not wanted:
            result.append(b)
            continue
        Path(out).mkdir(parents=True, exist_ok=True)
        log = Path(out) / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', b.name)}.stderr.log"
        result.append(isolated(b, timeout, str(log)))
    return result
