# gcn.mops(): cn.mops() with the gcnmops engine. Same arguments, defaults, checks (and error messages)
# and result as cn.mops(); plus `backend` ("auto", "cpu", "gpu") and `devices` (GPU ids).

.default_I <- c(0.025, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4)
.default_classes <- c("CN0", "CN1", "CN2", "CN3", "CN4", "CN5", "CN6", "CN7", "CN8")

gcn.mops <- function(input, I = c(0.025, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4),
                     classes = c("CN0", "CN1", "CN2", "CN3", "CN4", "CN5", "CN6", "CN7", "CN8"),
                     priorImpact = 1, cyc = 20, parallel = 0, norm = 1, normType = "poisson",
                     sizeFactor = "mean", normQu = 0.25, quSizeFactor = 0.75, upperThreshold = 0.5,
                     lowerThreshold = -0.9, minWidth = 3, segAlgorithm = "fast", minReadCount = 5,
                     useMedian = FALSE, returnPosterior = FALSE, ...,
                     backend = getOption("gcn.mops.backend", "auto"), devices = NULL, gpu = NULL,
                     reference = NULL, mode = c("frozen", "refit"), assay = NULL) {
  if (!is.null(reference)) {
    # case mode: the new samples against a reference (buildReference()), with the reference's parameters
    given <- setdiff(names(match.call())[-1L], c("", "input", "reference", "mode", "parallel", "backend",
                                                  "devices", "gpu", "sex", "integer", "assay"))
    if (length(given))
      warning(sprintf("gcn.mops(reference = ...) uses the reference's parameters; ignored: %s.",
                      paste(given, collapse = ", ")), call. = FALSE)
    dev <- .gpu_devices(gpu, backend, devices)
    if (methods::is(input, "SummarizedExperiment")) input <- .se_select(input, assay)
    return(.gcn_mops_reference(input, reference, mode, list(...), parallel, dev$backend))
  }
  args <- list(I = I, classes = classes, priorImpact = priorImpact, cyc = cyc, parallel = parallel,
               norm = norm, normType = normType, sizeFactor = sizeFactor, normQu = normQu,
               quSizeFactor = quSizeFactor, upperThreshold = upperThreshold, lowerThreshold = lowerThreshold,
               minWidth = minWidth, segAlgorithm = segAlgorithm, minReadCount = minReadCount,
               useMedian = useMedian, returnPosterior = returnPosterior)
  .gcn_mops(input, args, list(...), .gpu_devices(gpu, backend, devices), assay = assay)
}

exomegcn.mops <- function(input, I = c(0.025, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4),
                          classes = c("CN0", "CN1", "CN2", "CN3", "CN4", "CN5", "CN6", "CN7", "CN8"),
                          priorImpact = 10, cyc = 20, parallel = 0, norm = 1, normType = "poisson",
                          sizeFactor = "mean", normQu = 0.25, quSizeFactor = 0.75, upperThreshold = 0.5,
                          lowerThreshold = -0.8, minWidth = 5, segAlgorithm = "fast", minReadCount = 1,
                          useMedian = FALSE, returnPosterior = FALSE, ...,
                          backend = getOption("gcn.mops.backend", "auto"), devices = NULL, gpu = NULL,
                          assay = NULL) {
  gcn.mops(input, I = I, classes = classes, priorImpact = priorImpact, cyc = cyc, parallel = parallel,
           norm = norm, normType = normType, sizeFactor = sizeFactor, normQu = normQu,
           quSizeFactor = quSizeFactor, upperThreshold = upperThreshold, lowerThreshold = lowerThreshold,
           minWidth = minWidth, segAlgorithm = segAlgorithm, minReadCount = minReadCount,
           useMedian = useMedian, returnPosterior = returnPosterior, ..., backend = backend, devices = devices,
           gpu = gpu, assay = assay)
}

# The read counts as a double matrix (the engine views it in place), with the regions.
# A double matrix is used as it is (no copy); integer counts are converted once; a GRanges's columns
# are written into one new double matrix. Counts must be >= 0 and finite (checked in the same pass).
# A (Ranged)SummarizedExperiment gives the counts of its assay `assay` with its row ranges (summarized.R).
# Counts in a DelayedArray (an HDF5Array, ...) are read into memory here unless `delayed`: then `X` is NULL
# and `delayed` holds them (rows in the regions' order) for the streamed run (gcn.mops() only).
.prepare_input <- function(input, min_samples = 2L, vector_is_sample = FALSE, prefix = "Sample", assay = NULL,
                           delayed = FALSE) {
  rr <- NULL
  se_samples <- NULL
  if (methods::is(input, "SummarizedExperiment")) {
    rr <- .se_ranges(input)
    se_samples <- colnames(input)
    input <- .se_counts(input, assay)
  }
  if (methods::is(input, "DelayedArray") && !delayed) input <- as.matrix(input)
  out <- if (!is.null(rr)) .granges_input(rr, min_samples, input)
         else if (methods::is(input, "GRanges")) .granges_input(input, min_samples)
         else if (methods::is(input, "DelayedArray")) .delayed_input(input, min_samples)
         else if (is.matrix(input) || (is.vector(input) && is.atomic(input)) || inherits(input, "integer64"))
           .matrix_input(input, vector_is_sample)
         else stop("GRanges object or read count matrix needed as input.")   # cn.mops's words
  if (!is.null(se_samples)) out$sampleNames <- se_samples
  if (is.null(out$sampleNames))
    out$sampleNames <- paste(prefix, seq_len(ncol(if (is.null(out$X)) out$delayed else out$X)), sep = "_")
  # integer read counts (for singlecn.mops's normalizedData, which is the input as given)
  out$integer_counts <- if (methods::is(input, "GRanges"))
    all(vapply(as.list(mcols(input)), function(v) is.integer(v) || (methods::is(v, "Rle") && is.integer(runValue(v))), TRUE))
  else is.integer(input)
  out
}

.counts_error <- function() stop("All values must be greater or equal zero and finite.\n", call. = FALSE)

# The double matrix of dimensions `dims` made of the vectors `cols` one after another (integer, logical or
# double; a vector may fill several columns); an error unless every value is >= 0 and finite.
.count_matrix <- function(cols, dims) {
  X <- .Call(C_gm_count_matrix, cols, as.integer(dims))
  if (is.null(X)) .counts_error()
  X
}

# bit64's integer64 numbers as doubles (exact up to 2^53; dims and names kept): R stores their integers' bits in
# a double vector, which read as doubles would be ~1e-322; a larger count is an error, as cn.mops cannot model it
.from_integer64 <- function(x) {
  if (!inherits(x, "integer64")) return(x)
  if (!requireNamespace("bit64", quietly = TRUE))
    stop("The counts are bit64::integer64 numbers and the R package bit64 is not installed.", call. = FALSE)
  if (any(x > bit64::as.integer64("9007199254740992"), na.rm = TRUE))
    stop(paste("A count exceeds 2^53, the largest whole number a double holds exactly;",
               "cn.mops cannot model such counts."), call. = FALSE)
  d <- dim(x); dn <- dimnames(x)
  v <- bit64::as.double.integer64(x)
  if (!is.null(d)) { dim(v) <- d; dimnames(v) <- dn }
  v
}

# The metadata columns of a GRanges (numbers, logicals or Rle of them) as one double matrix of counts.
.granges_counts <- function(mc) {
  cols <- as.list(mc)
  if (length(cols) == 0L) stop("GRanges object or read count matrix needed as input.")
  for (k in seq_along(cols)) {
    v <- cols[[k]]
    if (methods::is(v, "Rle")) cols[[k]] <- v <- as.vector(v)
    if (inherits(v, "integer64")) cols[[k]] <- v <- .from_integer64(v)
    if (!(is.numeric(v) || is.logical(v)))
      stop(sprintf(paste("All values must be greater or equal zero and finite.\n",
                         "(metadata column '%s' is %s, not read counts)"), names(cols)[k], class(v)[1L]))
  }
  X <- .count_matrix(cols, c(length(cols[[1L]]), length(cols)))
  dimnames(X) <- list(NULL, names(cols))   # dimnames<- (a primitive) sets them in place
  X
}

# counts: NULL (the counts are the metadata columns of `input`), or a matrix of a row per range.
.granges_input <- function(input, min_samples, counts = NULL) {
  input <- sortSeqlevels(input)
  mc <- mcols(input)
  if ((if (is.null(counts)) ncol(mc) else ncol(counts)) == 1L && min_samples > 1L)
    stop("It is not possible to run cn.mops on only ONE sample.\n")
  if (length(unique(strand(input))) > 1L)
    stop(paste("Different strands found in GRanges object. Please make",
               "read counts independent of strand."))
  sn <- seqnames(input)
  rv <- as.integer(runValue(sn))
  if (anyDuplicated(rv)) {
    # cn.mops cuts the matrix per chromosome and needs each chromosome's rows together
    warning("Rows of a chromosome were not contiguous: regrouping rows by chromosome.", call. = FALSE)
    f <- as.integer(sn)
    o <- order(match(f, unique(f)), method = "radix")
    input <- input[o]
    if (!is.null(counts)) counts <- counts[o, , drop = FALSE]
    mc <- mcols(input)
    sn <- seqnames(input)
    rv <- as.integer(runValue(sn))
  }
  out <- list(chr_levels = levels(sn)[rv], chr_index = rep.int(seq_along(rv), runLength(sn)),
              start = start(input), end = end(input), seqinfo = seqinfo(input), input_type = "GRanges")
  X <- if (is.null(counts)) .granges_counts(mc)
       else if (methods::is(counts, "DelayedArray")) NULL
       else .matrix_input(counts, FALSE)$X
  out$sampleNames <- colnames(if (is.null(X)) counts else X)
  if (is.null(X)) out$delayed <- counts
  # cn.mops's row names, paste(chr, start, end, sep = "_"): a character vector that makes them in C when
  # they are read (paste: 2 s for 481,299 regions; most uses of the result never read them)
  out$rownames <- .Call(C_gm_region_names, out$chr_levels, out$chr_index, out$start, out$end)
  # cn.mops's gr: the regions without metadata, strand "*" (shares the input's ranges)
  g <- input
  mcols(g) <- NULL
  names(g) <- NULL
  if (any(runValue(strand(g)) != "*")) BiocGenerics::strand(g) <- "*"
  out$gr <- g
  # in place, as cn.mops names it (an assay's matrix keeps its own: naming it would copy it)
  if (is.null(counts)) dimnames(X) <- list(out$rownames, out$sampleNames)
  out$X <- X
  out
}

.matrix_input <- function(input, vector_is_sample) {
  input <- .from_integer64(input)
  if (!(is.numeric(input) || is.logical(input)))
    stop("All values must be greater or equal zero and finite.\n")
  X <- input
  # cn.mops: a vector is one region of N samples; the reference/single methods: one sample
  if (!is.matrix(input)) dim(X) <- if (vector_is_sample) c(length(input), 1L) else c(1L, length(input))
  if (is.double(X)) {
    if (!.Call(C_gm_counts_valid, X)) .counts_error()
  } else {
    dn <- dimnames(X)
    X <- .count_matrix(list(X), dim(X))
    if (!is.null(dn)) dimnames(X) <- dn
  }
  m <- nrow(X)
  list(X = X, sampleNames = if (is.matrix(input)) colnames(input), chr_levels = "undef",
       chr_index = rep.int(1L, m), start = seq_len(m), end = seq_len(m), input_type = "DataMatrix",
       rownames = NULL)
}

.num1 <- function(x) is.numeric(x) & length(x) == 1

# cn.mops's parameter checks, in its order, with its messages.
.check_args <- function(a, main = "CN2") {
  if (!is.numeric(a$I)) stop("\"I\" must be numeric.")
  if (!is.character(a$classes)) stop("\"classes\" must be character.")
  if (length(a$I) != length(a$classes)) stop("I and classes must have same length!")
  if (!(main %in% a$classes)) stop(sprintf("One element of classes must be %s .\n", main))
  if (!.num1(a$priorImpact)) stop("\"priorImpact\" be must numeric and of length 1.")
  if (!.num1(a$cyc)) stop("\"cyc\" must be numeric and of length 1.")
  if (!.num1(a$parallel)) stop("\"parallel\" must be numeric and of length 1.")
  if (!(a$normType %in% c("mean", "min", "median", "quant", "mode", "poisson")))
    stop(paste("Set normalization to \"mean\"", "\"min\", \"median\", \"quant\" or \"mode\"."))
  if (!.num1(a$normQu)) stop("\"normQu\" must be numeric and of length 1.")
  norm <- a$norm
  if (is.logical(norm)) norm <- as.integer(norm)
  if (!(length(norm) == 1L && norm %in% c(0, 1, 2))) stop("\"norm\" must be 0,1 or 2.")
  if (!.num1(a$lowerThreshold)) stop("\"lowerThreshold\" must be numeric and of length 1.")
  if (!.num1(a$upperThreshold)) stop("\"upperThreshold\" must be numeric and of length 1.")
  if (!.num1(a$minWidth)) stop("\"minWidth\" must be numeric and of length 1.")
  if (!is.character(a$segAlgorithm)) stop("\"segAlgorithm\" must be \"fastseg\" or \"DNAcopy\"!")
  if (!.num1(a$minReadCount)) stop("\"minReadCount\" must be numeric and of length 1.")
  if (!is.logical(a$returnPosterior)) stop("\"returnPosterior\" must be logical.")
  norm
}

# A matrix (or vector: one dimension) for the engine to fill, not initialized: type "double", "integer"
# or "raw". Its memory is outside R's vector-heap count (see src/gcnmops.c): a run's large matrices do
# not each force a full garbage collection.
.alloc <- function(type, dims, dn = NULL) {
  x <- .Call(C_gm_alloc, type, dims)
  if (!is.null(dn)) dimnames(x) <- dn
  x
}

# dev: .gpu_devices()'s backend, devices and timing kind.
.gcn_mops <- function(input, args, dots, dev, method = "cn.mops", assay = NULL) {
  mark <- .stopwatch()
  d <- .prepare_input(input, assay = assay, delayed = TRUE)
  mark("input")
  backend <- dev$backend
  devices <- dev$devices
  norm <- .check_args(args)
  args$norm <- norm
  if (!(is.character(backend) && length(backend) == 1L && backend %in% c("auto", "cpu", "gpu")))
    stop("\"backend\" must be \"auto\", \"cpu\" or \"gpu\".")
  m <- nrow(if (is.null(d$X)) d$delayed else d$X)
  N <- length(d$sampleNames)
  n <- length(args$I)
  sn <- d$sampleNames
  rn <- d$rownames
  classes <- args$classes
  if (m < 100)
    warning(paste("Normalization might not be applicable",
                  "for this small number of segments."))
  .engine()   # the engine is found (or an error says how to set it) before any work
  dots <- .with_seed(dots, args$segAlgorithm)

  version <- "1.53.0"
  params <- list(method, args$I, classes, args$priorImpact, args$cyc, args$normType, args$normQu,
                 args$upperThreshold, args$lowerThreshold, args$minWidth, args$segAlgorithm,
                 args$minReadCount, args$useMedian, "CN2", version,
                 .seg_params(dots))
  names(params) <- c("method", "folds", "classes", "priorImpact", "cyc", "normType", "normQu",
                     "upperThreshold", "lowerThreshold", "minWidth", "segAlgorithm", "minReadCount",
                     "useMedian", "mainClass", "version", "SegmentationParams")
  if (is.null(d$X)) {   # counts out of memory (summarized.R)
    if (norm == 1) message("Normalizing...")
    message("Starting local modeling, please be patient...  ")
    mark("call")
    out <- .gcn_mops_streamed(d, args, dots, backend, params, mark)
    .record_run(out$report, dev$times, mark())
    return(out$result)
  }

  env <- new.env(parent = emptyenv())
  for (nm in c("chr_levels", "start", "end", "seqinfo", "input_type", "sampleNames")) env[[nm]] <- d[[nm]]
  env$rownames <- rn
  if (d$input_type == "GRanges") {
    env$chr_index <- d$chr_index
  } else {
    env$chr_index_r <- d$chr_index  # the engine takes a bare matrix as rows 1..m on "undef"
  }
  env$X <- d$X
  args$segment_args <- dots
  env$args <- args
  env$backend <- backend
  env$devices <- if (is.null(devices)) NULL else as.integer(devices)
  dn <- list(rn, sn)
  # every numeric result allocated here, with its final dimnames; the engine writes into them
  env$normalizedData <- if (norm == 0) NULL else .alloc("double", c(m, N), dn)
  env$localAssessments <- .alloc("double", c(m, N), dn)
  env$individualCall <- .alloc("double", c(m, N), list(NULL, sn))
  ini <- .alloc("double", m)
  names(ini) <- rn
  env$iniCall <- ini
  rm(ini)
  env$L <- .alloc("double", c(m, n), list(rn, classes))
  env$A <- .alloc("double", c(m, n), list(rn, classes))
  env$cn <- .alloc("raw", c(m, N))
  if (isTRUE(args$returnPosterior))
    env$posteriorProbs <- .alloc("double", c(m, n, N), list(NULL, classes, sn))

  if (norm == 1) message("Normalizing...")
  message("Starting local modeling, please be patient...  ")
  mark("call")
  res <- .call_engine("run_from_r", env, method)
  mark("returned")

  if (norm == 0) {
    X <- env$X
    if (!identical(dimnames(X), dn)) dimnames(X) <- dn   # cn.mops's normalizedData carries these names
    env$normalizedData <- X
  }
  cov <- env$cov
  if (norm == 2) names(cov) <- sn
  if (!is.null(res$version)) params$version <- res$version   # the cn.mops version whose results these are
  params$cov <- cov
  params$L <- env$L
  params$A <- env$A
  env$params <- params
  env$segmented <- m > 5
  env$chr_index <- d$chr_index
  env$gr <- d$gr
  r <- .build_result(env)
  mark("built")
  .record_run(res, dev$times, mark())
  r
}
