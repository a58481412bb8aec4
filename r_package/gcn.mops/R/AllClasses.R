# The result class: cn.mops's CNVDetectionResult, slot for slot (cn.mops 1.53), defined with
# package = "cn.mops": a result carries the class attribute cn.mops's own results carry, so a saved
# result loads (and validObject()s) in a session with cn.mops, with gcn.mops, or with both, and either
# package's methods (show, plot, makeRobustCNVR, ...) apply to it.

setClass("CNVDetectionResult",
         representation = representation(
           gr                = "GRanges",
           normalizedData    = "matrix",
           localAssessments  = "matrix",
           individualCall    = "matrix",
           iniCall           = "numeric",
           posteriorProbs    = "array",
           cnvs              = "GRanges",
           cnvr              = "GRanges",
           segmentation      = "GRanges",
           integerCopyNumber = "matrix",
           params            = "list",
           sampleNames       = "character"),
         prototype = prototype(
           gr                = GRanges(),
           normalizedData    = matrix(),
           localAssessments  = matrix(),
           individualCall    = matrix(),
           iniCall           = vector("numeric", 1),
           posteriorProbs    = array(NA, dim = c(1, 1, 1)),
           cnvs              = GRanges(),
           cnvr              = GRanges(),
           segmentation      = GRanges(),
           integerCopyNumber = matrix(),
           params            = list(),
           sampleNames       = vector("character", 1)),
         package = "cn.mops")

# The class a new result gets (the same one whichever package is loaded).
.result_class <- function() methods::getClass("CNVDetectionResult", where = asNamespace("gcn.mops"))

.is_result <- function(object)
  isS4(object) && identical(as.character(class(object)), "CNVDetectionResult")
