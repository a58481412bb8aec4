# Accessor generics of cn.mops's CNVDetectionResult. Methods are defined for this package's class and,
# as a fallback ("ANY"), for any object of a class named CNVDetectionResult (cn.mops's own, used when
# cn.mops is installed), so the accessors work whichever package is attached last.

.with_gr <- function(object, values) {
  xx <- object@gr
  GenomicRanges::values(xx) <- values
  xx
}

.accessors <- list(
  gr                = function(object) object@gr,
  normalizedData    = function(object) .with_gr(object, object@normalizedData),
  localAssessments  = function(object) .with_gr(object, object@localAssessments),
  individualCall    = function(object) .with_gr(object, object@individualCall),
  iniCall           = function(object) .with_gr(object, object@iniCall),
  posteriorProbs    = function(object) object@posteriorProbs,
  cnvs              = function(object) object@cnvs,
  cnvr              = function(object) object@cnvr,
  segmentation      = function(object) object@segmentation,
  integerCopyNumber = function(object) .with_gr(object, object@integerCopyNumber),
  sampleNames       = function(object) object@sampleNames)

# params(): S4Vectors already has a generic params(x, ...); methods are added to it (no masking).
setMethod("params", "CNVDetectionResult", function(x, ...) x@params)
setMethod("params", "ANY", function(x, ...) {
  if (!.is_result(x))
    stop(sprintf("unable to find an inherited method for function 'params' for signature '\"%s\"'",
                 class(x)[1L]), call. = FALSE)
  x@params
})

for (.name in names(.accessors)) {
  setGeneric(.name, eval(substitute(function(object) standardGeneric(NAME), list(NAME = .name))))
  setMethod(.name, "CNVDetectionResult", .accessors[[.name]])
  setMethod(.name, "ANY", eval(substitute(function(object) {
    if (!.is_result(object))
      stop(sprintf("unable to find an inherited method for function '%s' for signature '\"%s\"'",
                   NAME, class(object)[1L]), call. = FALSE)
    .accessors[[NAME]](object)
  }, list(NAME = .name))))
}
rm(.name)

setGeneric("calcIntegerCopyNumbers", function(object) standardGeneric("calcIntegerCopyNumbers"))

setMethod("show", "CNVDetectionResult", function(object) .show_result(object))

# BiocGenerics' updateObject(): a result saved by cn.mops (its class attribute names package "cn.mops")
# as the portable result validObject() accepts where cn.mops is not installed (see AllClasses.R).
setMethod("updateObject", "CNVDetectionResult", function(object, ..., verbose = FALSE) .portable(object))

.show_result <- function(object) {
  cat("An object of class \"CNVDetectionResult\" (gcn.mops)\n")
  m <- length(object@gr)
  cat(sprintf("%s: %d regions x %d samples", object@params$method, m, length(object@sampleNames)), "\n")
  cat(sprintf("segments: %d, CNVs: %d, CNV regions: %d", length(object@segmentation), length(object@cnvs),
              length(object@cnvr)), "\n")
  cat("Slots: gr, normalizedData, localAssessments, individualCall, iniCall, posteriorProbs, cnvs, cnvr,",
      "segmentation, integerCopyNumber, params, sampleNames\n")
  invisible(object)
}
