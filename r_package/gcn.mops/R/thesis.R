# The gcn.MOPS thesis interface and the CPU path under cn.mops's names.
#
# - gpu = <device id> (as in gcn.MOPS): run on that GPU; where no usable GPU exists the run goes to the
#   CPU with a message. gpu = NULL (default): backend/devices decide ("auto": a GPU when there is one).
# - gcn.mops::cn.mops(), exomecn.mops(), haplocn.mops(), referencecn.mops(), singlecn.mops(): the same
#   functions with backend = "cpu" (cn.mops's names and signatures). When cn.mops is installed,
#   library(gcn.mops) does not attach these five names (see .onAttach in zzz.R): an attached cn.mops is
#   never masked, and gcn.mops::cn.mops(...) reaches ours.

# backend and devices from the thesis argument `gpu` (NULL: as given), and which of the thesis's timing
# variables the run sets: cpu.time.* where the CPU was asked for (backend = "cpu": cn.mops() & family),
# gpu.time.* otherwise (whichever device then runs it).
.gpu_devices <- function(gpu, backend, devices) {
  times <- if (identical(backend, "cpu")) "cpu" else "gpu"
  dev <- function(backend, devices) list(backend = backend, devices = devices, times = times)
  if (is.null(gpu)) return(dev(backend, devices))
  if (!is.numeric(gpu) || length(gpu) < 1L || anyNA(gpu) || any(gpu < 0) || any(gpu != round(gpu)))
    stop("\"gpu\" must be the id of a GPU device (0, 1, ...).")
  if (identical(backend, "cpu")) return(dev("cpu", NULL))
  if (!isTRUE(.gpu_usable())) {
    message("No usable CUDA GPU found: running on the CPU.")
    return(dev("cpu", NULL))
  }
  dev("gpu", as.integer(gpu))
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

# The thesis's stage timings. gcn.MOPS's gcn.mops() assigned gpu.time.<stage> and its cn.mops()
# cpu.time.<stage> into the global environment (<<-); its scripts read them there (test_script.R:
# gpu.time.modeling, cpu.time.modeling). Here they are active bindings in the namespace (made by .onLoad,
# exported): reading one gives that stage's seconds in the last run of its kind (.gpu_devices()), NA
# before one; gcn.mops writes nothing into the user's workspace. Stages, as measured here:
#   chkX            R: reading and checking the counts (.prepare_input)
#   formChkInput    R: input, argument checks, result allocation (a session's first run: engine start);
#                   plus the engine's view of the counts
#   normalization   engine: normalizeChromosomes
#   modeling        engine: the local models (EM), incl. the L, A, CN, sINI, INI matrices
#   postprocessing  engine: the rest of its call (handing the results to R)
#   seg             engine: segmentation and CNV calls
#   cnvCalling      R: assembling the CNVDetectionResult (segments, CNVs, CNV regions)
.thesis_stages <- c("chkX", "formChkInput", "normalization", "modeling", "postprocessing", "seg", "cnvCalling")

.bind_thesis_timings <- function(ns) {
  for (kind in c("gpu", "cpu")) for (stage in .thesis_stages) {
    name <- paste(kind, "time", stage, sep = ".")
    makeActiveBinding(name, local({
      kind <- kind
      stage <- stage
      name <- name
      function(value) {
        if (!missing(value)) stop(sprintf("%s is set by gcn.mops's runs, not by assignment.", name), call. = FALSE)
        .state$stage_times[[kind]][[stage]] %||% NA_real_
      }
    }), ns)
  }
}

# R's clock marks of a run: start, input (counts read), call (engine called), returned, built.
.stopwatch <- function() {
  marks <- c(start = proc.time()[["elapsed"]])
  function(name) {
    if (!missing(name)) marks[[name]] <<- proc.time()[["elapsed"]]
    marks
  }
}

# Keeps the engine's report of a run (.state$last_run, with R's own seconds as r_timings) and the thesis's
# stage timings of its kind ("gpu" / "cpu", from .gpu_devices()).
.record_run <- function(res, times, marks) {
  rt <- list(input = marks[["input"]] - marks[["start"]], prepare = marks[["call"]] - marks[["start"]],
             engine_call = marks[["returned"]] - marks[["call"]], build = marks[["built"]] - marks[["returned"]],
             total = marks[["built"]] - marks[["start"]])
  res$r_timings <- rt
  engine <- function(stage) as.numeric(res$timings[[stage]] %||% 0)
  staged <- engine("read") + engine("normalize") + engine("model") + engine("segment_call")
  .state$stage_times[[times]] <- list(
    chkX = rt$input, formChkInput = rt$prepare + engine("read"), normalization = engine("normalize"),
    modeling = engine("model"), postprocessing = max(0, rt$engine_call - staged), seg = engine("segment_call"),
    cnvCalling = rt$build)
  .state$last_run <- res
  invisible(res)
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
