"""The verifier's own process (:class:`conformance.mlir.emitter.VerifierProcess`): reads
one module text per line on stdin (a JSON string), parses and verifies it, and answers
each with one line on stdout (JSON ``[message]``, ``[null]`` where the verifier accepts
it). It ends at the end of its input. A verifier that crashes takes this process with it,
which is the answer its parent records."""
from __future__ import annotations

import json
import os
import sys


def main() -> None:
    import faulthandler
    faulthandler.disable()      # a crash here is the verifier's answer, not news
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)               # whatever else prints goes where stderr goes, not to the answers
    from conformance.mlir.emitter import VerifyError, parse
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            parse(json.loads(line))
            answer = None
        except VerifyError as e:
            answer = e.message
        except Exception as e:  # noqa: BLE001 - reported to the parent
            answer = f"{type(e).__name__}: {e}"
        answers.write(json.dumps([answer]) + "\n")
        answers.flush()


if __name__ == "__main__":      # pragma: no cover - started by VerifierProcess
    main()
