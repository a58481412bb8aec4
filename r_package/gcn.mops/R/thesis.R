# The gcn.MOPS thesis interface and the CPU path under cn.mops's names.
#
# - gpu = <device id> (as in gcn.MOPS): run on that GPU; where no usable GPU exists the run goes to the
#   CPU with a message. gpu = NULL (default): backend/devices decide ("auto": a GPU when there is one).
# - gcn.mops::cn.mops(), exomecn.mops(), haplocn.mops(), referencecn.mops(), singlecn.mops(): the same
#   functions with backend = "cpu" (cn.mops's names and signatures). When cn.mops is installed,
#   library(gcn.mops) does not attach these five names (see .onAttach in zzz.R): an attached cn.mops is
#   never masked, and gcn.mops::cn.mops(...) reaches ours.

# backend and devices from the thesis argument `gpu` (NULL: as given).
.gpu_devices <- function(gpu, backend, devices) {
  if (is.null(gpu)) return(list(backend = backend, devices = devices))
  if (!is.numeric(gpu) || length(gpu) < 1L || anyNA(gpu) || any(gpu < 0) || any(gpu != round(gpu)))
    stop("\"gpu\" must be the id of a GPU device (0, 1, ...).")
  if (identical(backend, "cpu")) return(list(backend = "cpu", devices = NULL))
  if (!isTRUE(.gpu_usable())) {
    message("No usable CUDA GPU found: running on the CPU.")
    return(list(backend = "cpu", devices = NULL))
  }
  list(backend = "gpu", devices = as.integer(gpu))
}

.gpu_usable <- function() {
  if (is.null(.state$gpu)) .state$gpu <- isTRUE(gcnmopsEngine()$gpu)
  .state$gpu
}

# cn.mops's params$SegmentationParams: the user's extra arguments pasted (the engine's seed left out).
.seg_params <- function(dots) {
  nm <- names(dots)
  if (!is.null(nm)) dots <- dots[is.na(nm) | nm != "seed"]
  do.call(paste, unname(dots))
}

# DNAcopy draws random numbers (jitter, permutations): its seed comes from R's stream (set.seed()
# reproduces a run) without advancing it. An explicit seed = ... in the call wins.
.with_seed <- function(dots, segAlgorithm) {
  if (identical(segAlgorithm, "DNAcopy") && !("seed" %in% names(dots))) dots$seed <- .rng_seed()
  dots
}

.cpu <- function(f) {
  formals(f)$backend <- "cpu"
  f
}

cn.mops <- .cpu(gcn.mops)
exomecn.mops <- .cpu(exomegcn.mops)
haplocn.mops <- .cpu(haplogcn.mops)
referencecn.mops <- .cpu(referencegcn.mops)
singlecn.mops <- .cpu(singlegcn.mops)

.cnmops_names <- c("cn.mops", "exomecn.mops", "haplocn.mops", "referencecn.mops", "singlecn.mops")

# Creates (or updates) reticulate's virtual environment "gcnmops" with the engine installed from
# `source` (the gcnmops repository, a wheel, or a pip requirement); the engine search finds it there.
installEngine <- function(source = .repo_root(), envname = "gcnmops", python = NULL) {
  if (is.null(source) || !nzchar(source))
    stop("Give installEngine() the gcnmops repository (or a wheel / pip requirement) to install from.")
  if (dir.exists(source)) source <- paste0(normalizePath(source), "[r]")
  reticulate::virtualenv_create(envname, python = python)
  reticulate::virtualenv_install(envname, c(source, "numpy<2", "pandas<3", "rpy2>=3.5,<3.6"),
                                 ignore_installed = FALSE)
  message(sprintf("gcn.mops engine installed in %s; it is found from the next R session on.",
                  file.path(reticulate::virtualenv_root(), envname)))
  invisible(.venv_python(file.path(reticulate::virtualenv_root(), envname)))
}
