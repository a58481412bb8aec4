# The rest of cn.mops's family: haplocn.mops, referencecn.mops, singlecn.mops as haplogcn.mops,
# referencegcn.mops, singlegcn.mops (cn.mops's arguments and defaults, plus backend and devices).
# The engine reads the counts in place, as for gcn.mops(); its outputs are copied once into matrices
# allocated by R (these entry points have no preallocated-output path in the engine yet).

.family_args <- function(env) {
  a <- as.list(env)
  a[c("input", "cases", "controls", "x", "backend", "devices", "gpu", "dev")] <- NULL
  a
}

# dev: .gpu_devices()'s backend, devices and timing kind.
.gcn_family <- function(fun, main, inputs, args, dots, dev, min_samples = 2L,
                        vector_is_sample = FALSE, prefixes = "Sample") {
  mark <- .stopwatch()
  backend <- dev$backend
  devices <- dev$devices
  d <- .prepare_input(inputs[[1L]], min_samples = min_samples, vector_is_sample = vector_is_sample,
                      prefix = prefixes[[1L]])
  dc <- NULL
  if (length(inputs) > 1L) {
    # referencecn.mops: the controls get the cases' checks, then both must have the same regions
    dc <- .prepare_input(inputs[[2L]], min_samples = 1L, vector_is_sample = TRUE, prefix = prefixes[[2L]])
    .check_same_regions(d, dc)
  }
  mark("input")
  norm <- .check_args(args, main = main)
  args$norm <- norm
  if (!(is.character(backend) && length(backend) == 1L && backend %in% c("auto", "cpu", "gpu")))
    stop("\"backend\" must be \"auto\", \"cpu\" or \"gpu\".")
  .engine()   # the engine is found (or an error says how to set it) before any work
  user_dots <- dots
  dots <- .with_seed(dots, args$segAlgorithm)
  .bridge_input <- function(d) {
    e <- new.env(parent = emptyenv())
    e$X <- d$X
    e$sampleNames <- d$sampleNames
    e$chr_levels <- d$chr_levels
    e$start <- d$start
    e$end <- d$end
    if (d$input_type == "GRanges") e$chr_index <- d$chr_index
    e$min_samples <- 1L
    e
  }
  env <- .bridge_input(d)
  env$min_samples <- min_samples
  if (!is.null(dc)) env$controls <- .bridge_input(dc)
  args$segment_args <- dots
  env$args <- args
  env$backend <- backend
  env$devices <- if (is.null(devices)) NULL else as.integer(devices)
  mark("call")
  res <- .call_engine("run_family_from_r", env, fun)
  mark("returned")
  if (d$input_type == "GRanges") env$seqinfo <- d$seqinfo
  p <- env$params
  p$SegmentationParams <- .seg_params(user_dots)   # the user's extra arguments (not the seed drawn here)
  env$params <- p
  r <- .build_result(env)
  # singlecn.mops does not normalize: its normalizedData is the input as given (integer counts stay integer)
  if (fun == "single_cn_mops" && isTRUE(d$integer_counts)) storage.mode(r@normalizedData) <- "integer"
  mark("built")
  .record_run(res, dev$times, mark())
  r
}

# referencecn.mops: cases and controls with the same regions (GRanges: the same ranges; matrices: the same
# number of rows).
.check_same_regions <- function(d, dc) {
  if (nrow(d$X) != nrow(dc$X)) stop("Cases and controls must have the same length.")
  if (identical(d$input_type, "GRanges") && identical(dc$input_type, "GRanges")) {
    same <- identical(d$chr_levels[d$chr_index], dc$chr_levels[dc$chr_index]) &&
      all(d$start == dc$start) && all(d$end == dc$end)
    if (!same) stop("Cases and controls must have the same ranges.")
  }
  invisible(TRUE)
}

haplogcn.mops <- function(input, I = c(0.025, 1, 2, 3, 4, 5, 6, 7, 8),
                          classes = c("CN0", "CN1", "CN2", "CN3", "CN4", "CN5", "CN6", "CN7", "CN8"),
                          priorImpact = 1, cyc = 20, parallel = 0, norm = 1, normType = "poisson",
                          sizeFactor = "mean", normQu = 0.25, quSizeFactor = 0.75, upperThreshold = 0.6,
                          lowerThreshold = -0.9, minWidth = 3, segAlgorithm = "fast", minReadCount = 1,
                          returnPosterior = FALSE, ...,
                          backend = getOption("gcn.mops.backend", "auto"), devices = NULL, gpu = NULL) {
  dev <- .gpu_devices(gpu, backend, devices)
  .gcn_family("haplo_cn_mops", "CN1", list(input), .family_args(environment()), list(...), dev)
}

referencegcn.mops <- function(cases, controls, I = c(0.025, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 8, 16, 32, 64),
                              classes = paste("CN", c(0:8, 16, 32, 64, 128), sep = ""),
                              priorImpact = 1, cyc = 20, parallel = 0, norm = 1, normType = "poisson",
                              sizeFactor = "mean", normQu = 0.25, quSizeFactor = 0.75, upperThreshold = 0.5,
                              lowerThreshold = -0.9, minWidth = 4, segAlgorithm = "DNAcopy", minReadCount = 1,
                              verbose = 1, returnPosterior = FALSE, ...,
                              backend = getOption("gcn.mops.backend", "auto"), devices = NULL, gpu = NULL) {
  dev <- .gpu_devices(gpu, backend, devices)
  .gcn_family("reference_cn_mops", "CN2", list(cases, controls), .family_args(environment()), list(...),
              dev, min_samples = 1L, vector_is_sample = TRUE, prefixes = c("Case", "Control"))
}

singlegcn.mops <- function(x, I = c(0.025, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4),
                           classes = c("CN0", "CN1", "CN2", "CN3", "CN4", "CN5", "CN6", "CN7", "CN8"),
                           priorImpact = 1, cyc = 20, parallel = 0, norm = 1, normType = "poisson",
                           sizeFactor = "mean", normQu = 0.25, quSizeFactor = 0.75, upperThreshold = 0.5,
                           lowerThreshold = -0.9, minWidth = 3, segAlgorithm = "fast", minReadCount = 1,
                           returnPosterior = FALSE, ...,
                           backend = getOption("gcn.mops.backend", "auto"), devices = NULL, gpu = NULL) {
  dev <- .gpu_devices(gpu, backend, devices)
  .gcn_family("single_cn_mops", "CN2", list(x), .family_args(environment()), list(...), dev,
              min_samples = 1L, vector_is_sample = TRUE)
}
