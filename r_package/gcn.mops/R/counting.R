# getReadCountsFromBAM() / getSegmentReadCountsFromBAM(): cn.mops's read counting (windows of WL bp, or
# the user's regions; reads with mapping quality >= 1 counted at their leftmost position) by the engine's
# parallel BAM reader (gcnmops.alignments.counting.count_reads). `mode` (paired/unpaired) is accepted for cn.mops's
# callers and does not change the counts, as in cn.mops.

getReadCountsFromBAM <- function(BAMFiles, sampleNames, refSeqNames, WL = 25000, parallel = 0, ...) {
  dots <- list(...)
  if (missing(refSeqNames) && !is.null(dots$refSeqName)) refSeqNames <- dots$refSeqName  # older name
  if (!is.numeric(WL) || length(WL) != 1L || WL < 1) stop("\"WL\" must be a positive number.")
  .count_bam(BAMFiles, if (missing(sampleNames)) NULL else sampleNames,
             if (missing(refSeqNames)) NULL else refSeqNames, WL, NULL, parallel)
}

getSegmentReadCountsFromBAM <- function(BAMFiles, GR, sampleNames, mode, parallel = 0, BAIFiles = NULL) {
  if (missing(GR) || !methods::is(GR, "GRanges")) stop("GR must be a GRanges object.")
  regions <- list(seqnames = as.character(seqnames(GR)), start = start(GR), end = end(GR))
  out <- .count_bam(BAMFiles, if (missing(sampleNames)) NULL else sampleNames, NULL, NULL, regions, parallel)
  res <- GR
  mcols(res) <- mcols(out)
  res
}

.count_bam <- function(BAMFiles, sampleNames, refSeqNames, WL, regions, parallel) {
  if (!is.character(BAMFiles) || length(BAMFiles) == 0L) stop("BAMFiles must be the paths of BAM files.")
  missing_files <- BAMFiles[!file.exists(BAMFiles)]
  if (length(missing_files)) stop(sprintf("BAM file(s) not found: %s", paste(missing_files, collapse = ", ")))
  if (!is.null(sampleNames) && length(sampleNames) != length(BAMFiles))
    stop("The number of sample names must equal the number of BAM files.")
  env <- new.env(parent = emptyenv())
  env$files <- normalizePath(BAMFiles)
  env$sampleNames <- if (is.null(sampleNames)) NULL else as.character(sampleNames)
  env$refSeqNames <- if (is.null(refSeqNames)) NULL else as.character(refSeqNames)
  env$WL <- WL
  env$regions <- regions
  env$threads <- if (is.numeric(parallel) && length(parallel) == 1L && parallel > 0) as.integer(parallel) else NULL
  .call_engine("count_from_r", env)
  sn <- env$sampleNames
  counts <- env$counts
  dim(counts) <- c(length(env$start), length(sn))
  lev <- unique(env$seqnames)
  gr <- GRanges(factor(env$seqnames, levels = lev), IRanges(env$start, env$end),
                seqlengths = stats::setNames(env$ref_lengths[match(lev, env$ref_names)], lev))
  cols <- lapply(seq_along(sn), function(j) counts[, j])
  names(cols) <- sn
  mcols(gr) <- do.call(S4Vectors::DataFrame, c(cols, list(check.names = FALSE)))
  sortSeqlevels(gr)
}
