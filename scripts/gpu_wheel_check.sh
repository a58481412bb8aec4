#!/usr/bin/env bash
# The built wheel with gcnmops[cuda13]'s dependencies, installed into a clean virtual environment on a GPU machine
# that has no network (the device tool: /work/.library/device/README.md), then `gcnmops info`, the example on the
# GPU and `pytest -m gpu` on a subset of the GPU tests, run against the installed package.
#
#   1. here, with network:      IMAGE_FREEZE=freeze.txt bash scripts/gpu_wheel_check.sh prepare
#      builds the wheel, downloads its [cuda13] dependencies and pytest for the GPU machine's Python (3.12, x86-64
#      manylinux) into .whl/ (ignored), and cuts them into parts .whl/part1 .. partN of at most PART_MB MiB each
#      (a wheel larger than that is split into pieces), as one call may carry 64 MiB with the working tree. It
#      prints the device calls to make. IMAGE_FREEZE: `pip freeze` of the GPU machine's Python (its CUDA stack:
#      numpy, cupy, numba-cuda, cuda-bindings...): the download is pinned to those versions and leaves out the
#      wheels the image holds; the venv then sees the image's packages through a .pth file (IMAGE_SITE on the
#      device, colon-separated; default every site-packages folder of its python3). Without it every dependency
#      is carried.
#   2. on the GPU machine, one call per part, in a row (the machine keeps the parts while it stays warm):
#      carry [".whl/partK"], command "bash scripts/gpu_wheel_check.sh device" (calls before the last one only
#      store their part: the device step waits until every part of .whl/MANIFEST is there).
#      The last call reassembles the wheels (checked against their SHA-256), makes the venv, installs with
#      pip --no-index and runs the checks; logs in $OUT (info.txt, example.txt, pytest.txt).
#   TESTS: the GPU test files run (default below); GCNMOPS_GOLDEN_DIR: golden data, where carried (e.g. carry
#   a copy of ../shared/golden and set it to that folder: the GPU golden tests then run too).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
part_mb=${PART_MB:-56}
tests=${TESTS:-test_landing_gpu.py test_multigpu.py test_model_gpu.py test_pipeline_gpu.py}

prepare() {
    local python=${PYTHON:-python3} all=.whl/all
    rm -rf .whl && mkdir -p "$all"
    grep -qx '/.whl/' .gitignore || echo "warning: .whl/ is not ignored by git (the device tool carries ignored paths only)" >&2
    "$python" -m build --wheel --outdir "$all" . >/dev/null
    local wheel
    wheel=$(ls "$all"/gcnmops-*.whl)
    local pins=()
    if [ -n "${IMAGE_FREEZE:-}" ]; then
        grep -E '^[A-Za-z0-9_.-]+==[^ ]+$' "$IMAGE_FREEZE" >.whl/pins.txt || true  # none: nothing pinned
        pins=(-c .whl/pins.txt)
    fi
    local status=0
    "$python" -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp ${pins[@]+"${pins[@]}"} \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux2010_x86_64 \
        --platform manylinux_2_12_x86_64 --platform manylinux1_x86_64 -d "$all" "$wheel[cuda13]" pytest \
        2>"$all/download.log" || status=$?
    grep -v '^WARNING: Location' "$all/download.log" >&2 || true
    if ((status)); then echo "pip download failed (status $status): see above" >&2; exit 1; fi
    rm -f "$all/download.log"
    if [ -n "${IMAGE_FREEZE:-}" ]; then  # the image's own wheels stay there
        local pin name version
        while IFS= read -r pin; do
            name=$(echo "${pin%%==*}" | tr 'A-Z.-' 'a-z__'); version=${pin#*==}
            for f in "$all"/*.whl; do
                [ "$(basename "$f" | cut -d- -f1 | tr 'A-Z.-' 'a-z__')" = "$name" ] &&
                    [ "$(basename "$f" | cut -d- -f2)" = "$version" ] && rm -f "$f"
            done
        done <.whl/pins.txt
    fi
    # parts of at most part_mb MiB: whole wheels where they fit, larger ones in pieces
    local limit=$((part_mb << 20)) k=1 used=0 f size piece
    mkdir -p .whl/part1
    : >.whl/MANIFEST
    for f in $(ls -S "$all"/*.whl); do
        size=$(stat -c %s "$f")
        echo "$(sha256sum "$f" | cut -d' ' -f1) $(basename "$f")" >>.whl/MANIFEST
        if ((size > limit)); then
            split -b "$limit" -d "$f" "$all/$(basename "$f").piece"
            for piece in "$all/$(basename "$f")".piece*; do
                k=$((k + 1)); mkdir -p ".whl/part$k"; mv "$piece" ".whl/part$k/"
                used=$(stat -c %s ".whl/part$k/$(basename "$piece")")
            done
            rm "$f"
            continue
        fi
        if ((used + size > limit)); then k=$((k + 1)); used=0; mkdir -p ".whl/part$k"; fi
        mv "$f" ".whl/part$k/"; used=$((used + size))
    done
    rmdir .whl/part1 2>/dev/null || true
    for p in .whl/part*; do  # whichever part comes first
        cp .whl/MANIFEST "$p/"
        if [ -f .whl/pins.txt ]; then cp .whl/pins.txt "$p/IMAGE_PINS"; fi
    done
    rm -rf "$all"
    local parts
    parts=$(ls -d .whl/part* | sort -V)
    echo "$(wc -l <.whl/MANIFEST) wheels in $(echo "$parts" | wc -w) parts; device calls, one after another:" >&2
    for p in $parts; do
        echo "  run(carry=[\"$p\"], command=\"bash scripts/gpu_wheel_check.sh device\", timeout_s=600)" >&2
    done
}

device() {
    local wheels=/tmp/gcnmops-wheels venv=/tmp/gcnmops-venv out=${OUT:-/tmp/gcnmops-out} manifest name
    manifest=$(ls .whl/part*/MANIFEST 2>/dev/null | head -1 || true)
    [ -n "$manifest" ] || { echo "no .whl/part*/MANIFEST here: run prepare, carry the parts" >&2; exit 1; }
    mkdir -p "$wheels" "$out"
    local missing=0
    while read -r sum name; do
        [ -f "$wheels/$name" ] && continue
        if ls .whl/part*/"$name" >/dev/null 2>&1; then
            cp .whl/part*/"$name" "$wheels/$name.tmp"
        elif ls .whl/part*/"$name".piece* >/dev/null 2>&1; then
            ls .whl/part*/"$name".piece* | awk -F'[.]piece' '{print $NF, $0}' | sort -n | cut -d' ' -f2- \
                | xargs cat >"$wheels/$name.tmp"
        else
            missing=$((missing + 1)); continue
        fi
        if [ "$(sha256sum "$wheels/$name.tmp" | cut -d' ' -f1)" = "$sum" ]; then
            mv "$wheels/$name.tmp" "$wheels/$name"
        else
            rm -f "$wheels/$name.tmp"; missing=$((missing + 1))  # a piece still to come
        fi
    done <"$manifest"
    if ((missing)); then
        echo "stored; $missing wheel(s) wait for parts still to be carried ($(ls -d .whl/part* | xargs -n1 basename | tr '\n' ' '))" >&2
        exit 0
    fi
    local python=${PYTHON:-python3}
    echo "== venv from $($python -c 'import sys; print(sys.executable, sys.version.split()[0])') (+ the image's packages)" >&2
    rm -rf "$venv"
    "$python" -m venv "$venv"
    if ls .whl/part*/IMAGE_PINS >/dev/null 2>&1; then  # prepared against the image: see its packages
        local sites
        sites=${IMAGE_SITE:-$("$python" -c 'import site; print(":".join(site.getsitepackages()))')}
        # site dirs, not bare paths: their own .pth files run too (numba-cuda's numba.cuda import redirect)
        "$venv/bin/python" -c 'import site, sys; open(site.getsitepackages()[0] + "/image.pth", "w").write("".join(f"import site; site.addsitedir({d!r})\n" for d in sys.argv[1].split(":") if d))' "$sites"
        echo "== the image's packages seen from $sites" >&2
    fi
    "$venv/bin/python" -m pip install -q --no-index --find-links "$wheels" "$(ls "$wheels"/gcnmops-*.whl)[cuda13]" pytest
    cd /tmp  # not the checkout: gcnmops is the installed one
    "$venv/bin/python" -c 'import gcnmops; print("gcnmops", gcnmops.__version__, "from", gcnmops.__file__)' | tee "$out/info.txt"
    "$venv/bin/gcnmops" info | tee -a "$out/info.txt"
    "$venv/bin/gcnmops" run --example --backend gpu -o /tmp/gcnmops-example 2>&1 | tee "$out/example.txt"
    cp /tmp/gcnmops-example/params.json "$out/example-params.json"
    # the tests and the benchmarks they take cohorts from, laid out as in the repository, without the package
    local check=/tmp/gcnmops-check
    rm -rf "$check" && mkdir -p "$check/tests"
    cp -r "$repo/benchmarks" "$check/"
    cp "$repo"/tests/*.py "$check/tests/"  # all: some GPU tests import helpers of others (test_golden)
    printf '[pytest]\nmarkers =\n    gpu: needs a real CUDA GPU\n    r: needs R with rpy2\n    slow: longer checks\n' \
        >"$check/pytest.ini"
    cd "$check/tests"
    set -o pipefail
    "$venv/bin/python" -m pytest -q -p no:cacheprovider -m gpu -rs $tests 2>&1 | tee "$out/pytest.txt"
}

case "${1:-}" in
    prepare) prepare ;;
    device) device ;;
    *) echo "usage: $0 prepare | device" >&2; exit 2 ;;
esac
