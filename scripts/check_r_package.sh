#!/usr/bin/env bash
# R CMD check --as-cran of the R package gcn.mops, built into a tarball as for a release, with the Python
# engine available (the repository's .venv) so that every test and runnable example runs.
#
#   scripts/check_r_package.sh [OUTDIR]        (default: a temporary directory, removed afterwards)
#
# Environment: GCNMOPS_PYTHON (default: .venv/bin/python of this repository), GCNMOPS_SHARED_DIR (default:
# ../shared; the golden cases and cn.mops.RData the tests compare with), R_CHECK_ARGS (default:
# "--as-cran --no-manual"). The build runs the vignette (the engine), the check runs it again, every example
# and the testthat suite (2 parallel workers); several minutes. tests/test_rbridge.py::test_r_package runs it.
#
# Then BiocCheck of the same tarball (below; GCNMOPS_BIOCCHECK=0: not run).
#
# Exit status 0 when the check has no ERROR and no WARNING and no test was skipped; the NOTEs left are
# printed (expected ones: "unable to verify current time" offline, the first example that starts the engine
# taking > 5 s). The WARNING that the 'checkbashisms' script is not installed (R asks for it to check
# ./configure, which is POSIX sh; --as-cran asks whatever _R_CHECK_BASHISMS_ says) is reported, not counted.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pkg="$repo/r_package/gcn.mops"
out="${1:-}"
if [[ -z "$out" ]]; then
    out="$(mktemp -d)"
    trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"

export GCNMOPS_PYTHON="${GCNMOPS_PYTHON:-$repo/.venv/bin/python}"
if [[ -z "${GCNMOPS_SHARED_DIR:-}" && -d "$repo/../shared" ]]; then
    GCNMOPS_SHARED_DIR="$(cd "$repo/../shared" && pwd)"
    export GCNMOPS_SHARED_DIR
fi
export _R_CHECK_FORCE_SUGGESTS_="${_R_CHECK_FORCE_SUGGESTS_:-false}"
# --as-cran's incoming-feasibility step would download CRAN's and Bioconductor's package lists: the check (run by
# the default test suite) gives the same answer with or without network
export _R_CHECK_CRAN_INCOMING_REMOTE_="${_R_CHECK_CRAN_INCOMING_REMOTE_:-false}"

if [[ ! -f "$pkg/data/cn.mops.rda" ]]; then
    echo "error: the R package's example data are missing ($pkg/data/cn.mops.rda): the vignette and examples" \
         "need them; run scripts/setup.sh where ../shared is present (it runs r_package/make_data.R)" >&2
    exit 2
fi

cd "$out"
# the vignette is built here (it runs the engine) and again by the check
R CMD build "$pkg" >build.log 2>&1 || { cat build.log; exit 1; }
tarball="$(ls -t gcn.mops_*.tar.gz | head -n 1)"
if ! grep -qx 'gcn.mops/inst/doc/gcn.mops.html' <<<"$(tar -tzf "$tarball")"; then
    cat build.log
    echo "R CMD build: the vignette was not built (gcn.mops/inst/doc/gcn.mops.html)" >&2
    exit 1
fi
# shellcheck disable=SC2086
R CMD check ${R_CHECK_ARGS:---as-cran --no-manual} "$tarball" >check.log 2>&1 || true
cat check.log

status="$(grep -E '^Status:' check.log || true)"
rout="gcn.mops.Rcheck/tests/testthat.Rout"
[[ -f "$rout.fail" ]] && rout="$rout.fail"
summary="$(grep -E '\[ FAIL [0-9]+ \| WARN [0-9]+ \| SKIP [0-9]+ \| PASS [0-9]+ \]' "$rout" 2>/dev/null | tail -n 1 || true)"
echo "testthat: ${summary:-no summary (tests did not run)}"
# the check's items that end in WARNING or ERROR ("* checking ... WARNING", or the status on a line of its own
# when the item printed more first), one line each; not counted: the
# top-level-files WARNING when all it says is that 'checkbashisms' is not installed
problems="$(awk '
    function flush() { if (item != "" && !(item ~ /top-level files/ && other == 0)) print item; item = ""; other = 0 }
    /^\* / { flush(); current = $0; if ($0 ~ /(ERROR|WARNING)$/) item = $0; next }
    /^ (ERROR|WARNING)$/ { if (item == "") item = current $0; next }
    /^Status:/ { flush(); next }
    item != "" && NF > 0 && $0 !~ /checkbashisms|Configure and cleanup|^manual\.$/ { other++ }
    END { flush() }' check.log)"
if [[ -z "$status" || "$status" == *ERROR* || -n "${problems//[[:space:]]/}" ]]; then
    echo "R CMD check failed: ${status:-no status line}" >&2
    [[ -n "${problems//[[:space:]]/}" ]] && echo "$problems" >&2
    exit 1
fi
if [[ -z "$summary" ]]; then
    echo "R CMD check: the tests did not run" >&2
    exit 1
fi
# with the shared data (golden cases, cn.mops.RData) every test must run: a skip means no engine or no data
if [[ -d "${GCNMOPS_SHARED_DIR:-/nonexistent}" && "$summary" != *"SKIP 0 "* ]]; then
    echo "R CMD check: tests skipped (is the engine found? GCNMOPS_PYTHON=$GCNMOPS_PYTHON)" >&2
    exit 1
fi
echo "R CMD check passed: $status"

# BiocCheck (Bioconductor's own checks) of the tarball: no ERROR, no WARNING (its NOTEs are printed). Offline: the
# checks that read Bioconductor's or CRAN's package lists, its version map (the version number's check: 0.99.x)
# or the support site on the web are left out, and BiocManager does not look its version up online (a
# `pkg:fun` typo check would: R code has no symbol before a colon). GCNMOPS_BIOCCHECK=0 skips it.
if [[ "${GCNMOPS_BIOCCHECK:-1}" == "0" ]]; then
    exit 0
fi
if ! Rscript -e 'quit(status = !requireNamespace("BiocCheck", quietly = TRUE))' >/dev/null 2>&1; then
    echo "BiocCheck: not installed (Debian: r-bioc-bioccheck), not run"
    exit 0
fi
BIOCONDUCTOR_ONLINE_VERSION_DIAGNOSIS=FALSE Rscript -e '
    BiocCheck::BiocCheck(commandArgs(TRUE)[1L], checkDir = ".", `no-check-deprecated` = TRUE,
                         `no-check-bioc-help` = TRUE, `no-check-CRAN` = TRUE, `no-check-version-num` = TRUE)' "$tarball" >bioccheck.log 2>&1 || true
sed -n '/BiocCheck results/,$p' bioccheck.log
counts="$(grep -oE '[0-9]+ ERRORS \| [0-9]+ WARNINGS \| [0-9]+ NOTES' bioccheck.log | tail -n 1 || true)"
if [[ -z "$counts" ]]; then
    tail -n 40 bioccheck.log
    echo "BiocCheck did not complete" >&2
    exit 1
fi
grep -E '^ *\* (ERROR|WARNING|NOTE):' -A3 bioccheck.log || true
if [[ "$counts" != "0 ERRORS | 0 WARNINGS"* ]]; then
    echo "BiocCheck failed: $counts" >&2
    exit 1
fi
echo "BiocCheck passed: $counts"
