# makeRobustCNVR() and calcFractionalCopyNumbers() (engine: gcnmops.calls.robust on a zero-copy view of
# the result). R builds the new GRanges / labels.

setGeneric("makeRobustCNVR", function(object, robust = 0.5, minWidth = 4, ...)
  standardGeneric("makeRobustCNVR"))
setGeneric("calcFractionalCopyNumbers", function(object, segStat = "mean", ...)
  standardGeneric("calcFractionalCopyNumbers"))

setMethod("makeRobustCNVR", "CNVDetectionResult", function(object, robust = 0.5, minWidth = 4, ...) {
  if (!is.numeric(robust) || length(robust) != 1L || !is.finite(robust))
    stop("\"robust\" must be numeric and of length 1.")
  if (!is.numeric(minWidth) || length(minWidth) != 1L) stop("\"minWidth\" must be numeric and of length 1.")
  object <- .portable(object)
  env <- new.env(parent = emptyenv())
  env$object <- object
  env$robust <- robust
  env$minWidth <- minWidth
  .call_engine("robust_from_r", env)
  gr <- object@gr
  n <- length(env$cnvr_start)
  sn <- object@sampleNames
  cnvr <- GRanges(env$cnvr_seqnames, IRanges(env$cnvr_start, env$cnvr_end), seqinfo = seqinfo(gr))
  CN <- matrix(NA, nrow = n, ncol = length(sn), dimnames = list(NULL, sn))
  GenomicRanges::values(cnvr) <- CN
  object@cnvr <- sortSeqlevels(cnvr)
  object
})

setMethod("calcFractionalCopyNumbers", "CNVDetectionResult", function(object, segStat = "mean", ...) {
  object <- .portable(object)
  env <- new.env(parent = emptyenv())
  env$object <- object
  env$segStat <- segStat
  .call_engine("fractional_from_r", env)
  cnvr <- object@cnvr
  CN <- env$cnvr_CN
  dim(CN) <- c(length(cnvr), length(object@sampleNames))
  colnames(CN) <- object@sampleNames
  GenomicRanges::values(cnvr) <- CN
  cnvs <- object@cnvs
  GenomicRanges::values(cnvs)$CN <- env$cnv_CN
  seg <- object@segmentation
  GenomicRanges::values(seg)$CN <- env$seg_CN
  object@cnvr <- cnvr
  object@cnvs <- cnvs
  object@segmentation <- seg
  object
})
