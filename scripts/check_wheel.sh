#!/usr/bin/env bash
# The install a new user makes, checked: builds the sdist and the wheel (python -m build: the wheel from the
# sdist), installs the wheel into a fresh virtual environment with plain pip (no setup.sh, nothing of this
# checkout on the path), then there: gcnmops --version, gcnmops info, gcnmops run --example twice (the first
# compiles the kernels and says so on stderr, the second loads them) and a subset of the tests.
#
# Usage: scripts/check_wheel.sh WORKDIR [PIP_OPTIONS...]
#   WORKDIR       a new folder for dist/, venv/, the example's output and the logs
#   PIP_OPTIONS   for the install, e.g. --no-index --find-links WHEELS (no network)
#   BACKEND       the example's --backend (default cpu); EXTRAS: the extras installed (default formats)
#   TESTS         the test files run from the installed package (default: test_api.py test_provenance.py)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mkdir -p "$1" && cd "$1" && pwd)
shift
python=${PYTHON:-python3}
backend=${BACKEND:-cpu}
extras=${EXTRAS-formats}  # formats (pysam): the test subset reads the VCFs as bgzip files
tests=${TESTS:-test_api.py test_provenance.py}
export XDG_CACHE_HOME="$work/cache"  # a new user's kernel cache: nothing compiled yet

echo "== build" >&2
"$python" -m build --outdir "$work/dist" "$repo" >"$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
wheel=$(ls "$work"/dist/gcnmops-*.whl)
echo "== install $(basename "$wheel")${extras:+[$extras]} into a fresh venv" >&2
"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "$@" "$wheel${extras:+[$extras]}" pytest
cd "$work"  # not the checkout: gcnmops is the installed one
site=$("$work/venv/bin/python" -c 'import gcnmops, pathlib; print(pathlib.Path(gcnmops.__file__).parent)')
case "$site" in "$work"/venv/*) ;; *) echo "gcnmops imported from $site, not the venv" >&2; exit 1 ;; esac
"$work/venv/bin/gcnmops" --version
"$work/venv/bin/gcnmops" info

for n in 1 2; do
    echo "== gcnmops run --example --backend $backend ($n)" >&2
    "$work/venv/bin/gcnmops" run --example -o "$work/example$n" --backend "$backend" 2>"$work/run$n.err"
    cat "$work/run$n.err" >&2
done

echo "== tests from the installed package: $tests" >&2
mkdir -p "$work/tests"
cp "$repo"/tests/conftest.py "$repo"/tests/background.py "$work/tests/"
for t in $tests; do cp "$repo/tests/$t" "$work/tests/"; done
(cd "$work/tests" && "$work/venv/bin/python" -m pytest -q -p no:cacheprovider -m "${MARKERS:-not slow}" $tests)
echo "check_wheel: ok" >&2
