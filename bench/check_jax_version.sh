#!/usr/bin/env bash
# Run the backend tests (and, with --run, a quick jax,xla,interpreter conformance run)
# against another jax/jaxlib than CI's: CI runs the lowest supported version (0.10.2 on
# Python 3.11); jax/jaxlib 0.11 and 0.12 exist only for Python >= 3.12.
#
#   bench/check_jax_version.sh PYTHON VERSION [VENV] [--run OUT]
#   bench/check_jax_version.sh /root/.pyenv/versions/3.12.1/bin/python 0.12.0.1
#   bench/check_jax_version.sh /root/.pyenv/versions/3.12.1/bin/python 0.11.2 /tmp/venv011
#   bench/check_jax_version.sh /root/.pyenv/versions/3.12.1/bin/python 0.12.0.1 "" --run /tmp/j12
#
# VENV (default /tmp/conformance-jax-VERSION) is created if missing, outside the
# checkout; the project is installed editable with its test extra, then jax==VERSION and
# jaxlib==VERSION. Compare a --run's results.jsonl with the same run on 0.10.2.
set -euo pipefail
PYTHON=${1:?usage: $0 PYTHON VERSION [VENV] [--run OUT]}
VERSION=${2:?usage: $0 PYTHON VERSION [VENV] [--run OUT]}
VENV=${3:-}
VENV=${VENV:-/tmp/conformance-jax-$VERSION}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install -q -e "$ROOT[test]"
fi
"$VENV/bin/pip" install -q "jax==$VERSION" "jaxlib==$VERSION"
"$VENV/bin/python" -c "import jax, jaxlib; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__)"
cd "$ROOT"
"$VENV/bin/python" -m pytest tests/test_jaxlib_versions.py tests/test_backends.py \
    tests/test_xla_backend.py tests/test_interpreter_backend.py tests/test_emitter.py \
    tests/test_isolation.py tests/test_packaging.py -q -x -n 0
if [ "${4:-}" = "--run" ]; then
    "$VENV/bin/conformance" run --depth quick --backend jax,xla,interpreter \
        --out "${5:?--run needs an output folder}" --no-progress || true
fi
