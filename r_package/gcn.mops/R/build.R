# Builds the CNVDetectionResult from a bridge environment, exactly as cn.mops assembles it.
# Used by gcn.mops() (after the engine ran) and by the Python side's to_r().
#
# Environment layout: input_type ("GRanges" / "DataMatrix"), chr_levels (chromosomes in order of
# appearance), chr_index (1-based per region), start, end, seqinfo (optional), sampleNames, rownames
# (or NULL); matrices normalizedData, localAssessments, individualCall (m x N), iniCall (m), cn (raw
# m x N: 0-based class index), posteriorProbs (m x n x N or absent); params (cn.mops's params list incl.
# cov, L, A); segmented (FALSE when fewer than 6 regions); tables seg_*, cnv_* (n, chr, start, end,
# sample, median, mean, optional CN: 0-based class index) and cnvr_* (n, chr, start, end, columns
# (names of the label columns), optional CN: regions x samples class indices; or, with cnvr_kind
# "segments" (singlecn.mops), the same fields as the segments).

.regions_granges <- function(env) {
  if (!is.null(env$gr)) return(env$gr)   # gcn.mops(): made from the input GRanges, seqlevels sorted
  chr <- env$chr_levels[env$chr_index]
  si <- env$seqinfo
  gr <- if (is.null(si)) GRanges(chr, IRanges(env$start, env$end))
        else GRanges(chr, IRanges(env$start, env$end), seqinfo = si)
  sortSeqlevels(gr)
}

# 0-based class index of each label (NA when not a class), with the labels' dimensions: the label
# matrix read back (gcnmops.outputs.rresult.from_r); C, as the matrix has a label per region and sample.
.label_index <- function(labels, classes) .Call(C_gm_label_index, labels, classes)

.labels <- function(idx, classes) {
  out <- classes[idx + 1L]          # NA index (R's NA_integer_) stays NA
  out
}

.segments_granges <- function(env, prefix, gr, classes) {
  get0p <- function(name) get0(paste0(prefix, name), envir = env, inherits = FALSE)
  n <- get0p("n")
  if (is.null(n) || n == 0L) return(NULL)
  cn <- get0p("CN")
  g <- GRanges(seqnames = env$chr_levels[get0p("chr")], IRanges(get0p("start"), get0p("end")),
               seqinfo = seqinfo(gr),
               "sampleName" = env$sampleNames[get0p("sample")], "median" = get0p("median"),
               "mean" = get0p("mean"), "CN" = if (is.null(cn)) rep(NA, n) else .labels(cn, classes))
  sortSeqlevels(g)
}

.cnvr_granges <- function(env, gr, classes) {
  n <- env$cnvr_n
  if (is.null(n) || n == 0L) return(NULL)
  # singlecn.mops: the CNV regions are the CNVs themselves
  if (identical(env$cnvr_kind, "segments")) return(.segments_granges(env, "cnvr_", gr, classes))
  cnvr <- GRanges(seqnames = env$chr_levels[env$cnvr_chr], IRanges(env$cnvr_start, env$cnvr_end),
                  seqinfo = seqinfo(gr))
  cnvr <- sortSeqlevels(cnvr)
  N <- length(env$sampleNames)
  cn <- env$cnvr_CN
  cnvrCN <- if (is.null(cn)) matrix(NA, ncol = N, nrow = length(cnvr)) else .labels(cn, classes)
  dim(cnvrCN) <- c(length(cnvr), N)
  colnames(cnvrCN) <- if (is.null(env$cnvr_columns)) env$sampleNames else env$cnvr_columns
  GenomicRanges::values(cnvr) <- cnvrCN
  cnvr
}

.build_result <- function(env) {
  params <- env$params
  classes <- params$classes
  gr <- .regions_granges(env)
  sINI <- env$localAssessments
  CN <- .Call(C_gm_labels, env$cn, classes)   # classes[idx + 1L], in C (the m x N label matrix)
  dimnames(CN) <- dimnames(sINI)
  r <- .portable(new(.result_class()))
  r@gr <- gr
  r@normalizedData <- env$normalizedData
  r@localAssessments <- sINI
  r@params <- params
  r@integerCopyNumber <- CN
  r@sampleNames <- env$sampleNames
  if (!isTRUE(env$segmented)) {
    # cn.mops: no segmentation below 6 regions; individualCall = sINI, the rest keeps the prototype
    r@individualCall <- sINI
    return(r)
  }
  r@individualCall <- env$individualCall
  r@iniCall <- env$iniCall
  post <- get0("posteriorProbs", envir = env, inherits = FALSE)
  if (!is.null(post)) r@posteriorProbs <- post
  seg <- .segments_granges(env, "seg_", gr, classes)
  if (!is.null(seg)) r@segmentation <- seg
  cnvs <- .segments_granges(env, "cnv_", gr, classes)
  if (!is.null(cnvs)) {
    r@cnvs <- cnvs
    r@cnvr <- .cnvr_granges(env, gr, classes)
  }
  r
}
