#!/usr/bin/env bash
# Installs what gcnmops needs on a fresh Debian machine: R 4.2 with the Bioconductor packages the
# R side uses (Debian packages), and a Python virtual environment .venv with the package installed.
# Idempotent: steps already done are skipped. The Python that R uses needs numpy < 2 (Debian's
# reticulate 1.28 refuses NumPy 2), hence the pins below.
set -euo pipefail
cd "$(dirname "$0")/.."

R_PACKAGES="r-base-core r-base-dev r-bioc-genomicranges r-bioc-iranges r-bioc-s4vectors r-bioc-genomeinfodb
 r-bioc-biocgenerics r-bioc-rsamtools r-cran-reticulate r-cran-testthat r-cran-jsonlite r-bioc-dnacopy
 r-bioc-summarizedexperiment r-bioc-hdf5array r-cran-knitr r-cran-rmarkdown r-bioc-biocstyle r-bioc-bioccheck qpdf"
# the genome tools the tests open our files with (BED, VCF)
TOOLS="bcftools tabix vcftools bedtools"

if ! Rscript -e 'suppressMessages(library(GenomicRanges)); library(reticulate); library(testthat); library(DNAcopy); library(SummarizedExperiment); library(HDF5Array); library(BiocStyle)' >/dev/null 2>&1 || ! command -v qpdf >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "setup: installing R and Bioconductor packages (Debian)..." >&2
        apt-get update -qq
        # shellcheck disable=SC2086
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $R_PACKAGES >/dev/null
    else
        echo "setup: R with GenomicRanges/reticulate/testthat/SummarizedExperiment not found; R-side features and tests will be skipped" >&2
    fi
fi

# R CMD check --as-cran checks the R package's ./configure with checkbashisms (Debian: devscripts)
if ! command -v checkbashisms >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends devscripts >/dev/null
fi

missing_tools=""
for tool in bcftools tabix vcf-validator bedtools; do command -v "$tool" >/dev/null || missing_tools=1; done
if [ -n "$missing_tools" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing bcftools, tabix, vcftools and bedtools (Debian)..." >&2
    apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $TOOLS >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
if ! .venv/bin/python -c 'import gcnmops, pytest' >/dev/null 2>&1 || [ pyproject.toml -nt .venv/.installed ]; then
    echo "setup: installing the Python package into .venv..." >&2
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null
    extras="test,bam,dask,workflows"
    if command -v R >/dev/null; then extras="$extras,r"; fi
    .venv/bin/python -m pip install -q -e ".[$extras]" "numpy<2" "pandas<3" "pyarrow<20"
    touch .venv/.installed
fi

# The R package gcn.mops (r_package/gcn.mops): gcn.mops() & co. for R sessions, calling the Python engine
# in .venv (the package records this repository at install time). Reinstalled when its sources change.
# The .venv is also linked as reticulate's virtual environment "gcnmops" (${WORKON_HOME:-~/.virtualenvs}/gcnmops),
# where gcn.mops looks for its engine when installed from elsewhere (a source tarball, R CMD check).
venv_home="${WORKON_HOME:-$HOME/.virtualenvs}"
if [ ! -e "$venv_home/gcnmops" ] && mkdir -p "$venv_home" 2>/dev/null; then
    ln -s "$PWD/.venv" "$venv_home/gcnmops"
fi
if command -v Rscript >/dev/null && Rscript -e 'quit(status = !all(vapply(c("GenomicRanges", "reticulate"), requireNamespace, TRUE, quietly = TRUE)))' >/dev/null 2>&1; then
    # cn.mops's example data (data(cn.mops), the vignette's BAMs) come from the reference data beside the
    # repository, not from this repository: built into the package where ../shared is present
    if [ -d ../shared/golden ] && [ ! -f r_package/gcn.mops/data/cn.mops.rda ]; then
        (cd r_package && Rscript make_data.R ../../shared) >/dev/null
    fi
    stamp=.venv/.r_installed
    if [ ! -f "$stamp" ] || [ -n "$(find r_package/gcn.mops -newer "$stamp" -type f ! -path '*/inst/gcnmops_repo' -print -quit)" ] \
        || ! Rscript -e 'quit(status = !requireNamespace("gcn.mops", quietly = TRUE))' >/dev/null 2>&1; then
        echo "setup: installing the R package gcn.mops..." >&2
        lib=$(Rscript -e 'cat(.libPaths()[1])')
        if [ ! -w "$lib" ]; then
            lib=$(Rscript -e 'cat(path.expand(Sys.getenv("R_LIBS_USER")))')
            mkdir -p "$lib"
        fi
        R CMD INSTALL -l "$lib" r_package/gcn.mops >/dev/null
        touch "$stamp"
    fi
fi

# Compile and cache every CPU kernel of a run once (~1 min on 2 cores the first time, seconds later), so that the
# first real run does not pay for it.
echo "setup: compiling the kernels (gcnmops warmup)..." >&2
.venv/bin/python -m gcnmops warmup >/dev/null
