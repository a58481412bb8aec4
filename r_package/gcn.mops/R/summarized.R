# SummarizedExperiment in and out, and counts held out of memory (DelayedArray, HDF5Array).
#
# In: a (Ranged)SummarizedExperiment gives the counts of one assay (by name or number; default "counts" when
# there is one, else the first) and, when ranged, its row ranges as a GRanges input would. An ordinary matrix
# assay is read in place as a matrix input is. A DelayedArray assay (or a bare DelayedMatrix) given to gcn.mops()
# is streamed: R reads a block of rows at a time (DelayedArray's block processing, blocks of getAutoBlockSize())
# and the engine writes each block into a count store on disk, runs cn.mops chromosome by chromosome on it
# (gcnmops's run_streaming, the same result bit for bit) and reads its result folder back; the whole count
# matrix is never held, neither by R nor by the engine. The family's other functions read such counts into
# memory (the engine has no streamed path for them).
# Out: as(result, "RangedSummarizedExperiment").

.se_counts <- function(se, assay) {
  an <- SummarizedExperiment::assayNames(se)
  if (length(SummarizedExperiment::assays(se)) == 0L)
    stop("The SummarizedExperiment has no assay: read counts needed as input.", call. = FALSE)
  if (is.null(assay)) assay <- if ("counts" %in% an) "counts" else 1L
  if (!((is.character(assay) && length(assay) == 1L && assay %in% an) ||
        (is.numeric(assay) && length(assay) == 1L && assay >= 1 && assay <= length(SummarizedExperiment::assays(se)))))
    stop(sprintf("The SummarizedExperiment has no assay %s (its assays: %s): choose one with assay = .",
                 deparse(assay), if (length(an)) paste(sprintf("\"%s\"", an), collapse = ", ")
                 else sprintf("%d unnamed", length(SummarizedExperiment::assays(se)))), call. = FALSE)
  # withDimnames = FALSE: the matrix as stored (naming it would copy it; .prepare_input takes the SE's names)
  SummarizedExperiment::assay(se, assay, withDimnames = FALSE)
}

# The SummarizedExperiment with its assay `assay` alone (NULL: as it is), for functions that take its default.
.se_select <- function(se, assay) {
  if (is.null(assay)) return(se)
  .se_counts(se, assay)   # the check and its message
  SummarizedExperiment::assays(se, withDimnames = FALSE) <- SummarizedExperiment::assays(se, withDimnames = FALSE)[assay]
  se
}

# The regions of a RangedSummarizedExperiment (a GRanges of one range per row), else NULL.
.se_ranges <- function(se) {
  if (!methods::is(se, "RangedSummarizedExperiment")) return(NULL)
  rr <- SummarizedExperiment::rowRanges(se)
  if (!methods::is(rr, "GRanges")) return(NULL)   # a GRangesList (no ranges given): a matrix input
  rr
}

# A DelayedMatrix without regions: the rows are regions 1..m of "undef", as for a matrix.
.delayed_input <- function(counts, min_samples) {
  m <- nrow(counts)
  if (ncol(counts) == 1L && min_samples > 1L) stop("It is not possible to run cn.mops on only ONE sample.\n")
  list(X = NULL, delayed = counts, sampleNames = colnames(counts), chr_levels = "undef",
       chr_index = rep.int(1L, m), start = seq_len(m), end = seq_len(m), input_type = "DataMatrix", rownames = NULL)
}

# gcn.mops() on d$delayed (.prepare_input(delayed = TRUE)): streamed through the engine (see above); params:
# the result's params as gcn.mops() makes them (cov, L and A are the run's).
.gcn_mops_streamed <- function(d, args, dots, backend, params, mark) {
  if (!identical(args$segAlgorithm, "fast"))
    stop(paste("Counts in a DelayedArray are streamed through the engine, which segments with",
               "segAlgorithm = \"fast\" only: use it, or give the counts as an ordinary matrix."), call. = FALSE)
  counts <- d$delayed
  grid <- DelayedArray::rowAutoGrid(counts)
  rows <- lapply(seq_along(grid), function(i) IRanges::ranges(grid[[i]])[1L])
  env <- new.env(parent = emptyenv())
  for (nm in c("chr_levels", "chr_index", "start", "end", "sampleNames")) env[[nm]] <- d[[nm]]
  env$block_start <- vapply(rows, BiocGenerics::start, 1L)
  env$block_end <- vapply(rows, BiocGenerics::end, 1L)
  env$read_block <- function(i) {
    b <- DelayedArray::read_block(counts, grid[[i]])
    if (!(is.double(b) || is.integer(b))) storage.mode(b) <- "double"
    b
  }
  tmp <- tempfile("gcnmops-stream-")
  dir.create(tmp)
  on.exit(unlink(tmp, recursive = TRUE), add = TRUE)
  env$store <- file.path(tmp, "counts.zarr")
  env$outdir <- file.path(tmp, "result")
  args$segment_args <- dots
  env$args <- args
  env$backend <- backend
  res <- .call_engine("stream_from_r", env)
  mark("returned")
  p <- env$params
  cov <- unname(p$cov)
  if (args$norm == 2) names(cov) <- d$sampleNames
  params$cov <- cov
  params$L <- p$L
  params$A <- p$A
  if (identical(d$input_type, "GRanges")) {
    env$gr <- d$gr
    env$seqinfo <- d$seqinfo
  } else {
    # a matrix's regions went to the store as rows of "undef": unnamed, as a matrix input's result
    env$input_type <- "DataMatrix"
    for (nm in c("normalizedData", "localAssessments")) rownames(env[[nm]]) <- NULL
    names(env$iniCall) <- NULL
    rownames(params$L) <- NULL
    rownames(params$A) <- NULL
  }
  env$params <- params
  r <- .build_result(env)
  mark("built")
  list(result = r, report = res)
}

.result_rse <- function(from) {
  sINI <- from@localAssessments
  m <- nrow(sINI)
  dn <- list(rownames(sINI), from@sampleNames)
  named <- function(x) { dimnames(x) <- dn; x }
  assays <- list(normalizedData = named(from@normalizedData), localAssessments = named(sINI),
                 individualCall = named(from@individualCall), integerCopyNumber = named(from@integerCopyNumber))
  rr <- from@gr
  names(rr) <- dn[[1L]]
  if (length(from@iniCall) == m) mcols(rr)$iniCall <- unname(from@iniCall)
  meta <- list(segmentation = from@segmentation, cnvs = from@cnvs, cnvr = from@cnvr, params = from@params)
  if (!all(is.na(from@posteriorProbs))) meta$posteriorProbs <- from@posteriorProbs
  SummarizedExperiment::SummarizedExperiment(
    assays = assays, rowRanges = rr, colData = S4Vectors::DataFrame(row.names = from@sampleNames), metadata = meta)
}

setAs("CNVDetectionResult", "RangedSummarizedExperiment", function(from) .result_rse(from))
