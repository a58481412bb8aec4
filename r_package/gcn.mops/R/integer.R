# calcIntegerCopyNumbers(): one integer copy number per segment, CNV and CNV region (engine:
# gcnmops.calls.integer.calc_integer_copy_numbers on a zero-copy view of the result's matrices); the labels
# are made here by indexing params$classes.

.calc_integer <- function(object) {
  object <- .portable(object)
  if (length(object@cnvr) == 0L || length(object@cnvs) == 0L)
    stop("No CNV regions in result object. Rerun cn.mops with different parameters!")
  # new samples called against a reference: their integer copy numbers need the model of the call (frozen: the
  # reference's parameters; refit: the combined cohort's data), which the result does not hold
  cm <- object@params$caseMode
  if (!is.null(cm) || !is.null(object@params$sex))
    stop(paste0("This result was called ", if (is.null(cm)) "sex-aware" else
                sprintf("against a stored reference (mode = \"%s\")", cm$mode),
                ": its copy numbers need the model the call used, which the result does not hold. ",
                "Ask for them in the call: gcn.mops(newSamples, reference = ref, integer = TRUE)."), call. = FALSE)
  env <- new.env(parent = emptyenv())
  env$object <- object
  .call_engine("integer_from_r", env, getOption("gcn.mops.integerBackend", "cpu"))
  classes <- object@params$classes
  seg <- object@segmentation
  GenomicRanges::values(seg)$CN <- classes[env$seg_CN + 1L]
  cnvs <- object@cnvs
  GenomicRanges::values(cnvs)$CN <- classes[env$cnv_CN + 1L]
  cnvr <- object@cnvr
  CN <- classes[env$cnvr_CN + 1L]
  dim(CN) <- c(length(cnvr), length(object@sampleNames))
  colnames(CN) <- object@sampleNames
  GenomicRanges::values(cnvr) <- CN
  object@cnvr <- cnvr
  object@cnvs <- cnvs
  object@segmentation <- seg
  object
}

setMethod("calcIntegerCopyNumbers", "CNVDetectionResult", function(object) .calc_integer(object))
setMethod("calcIntegerCopyNumbers", "ANY", function(object) {
  if (!.is_result(object))
    stop(sprintf("unable to find an inherited method for function 'calcIntegerCopyNumbers' for signature '\"%s\"'",
                 class(object)[1L]), call. = FALSE)
  .calc_integer(object)
})
