# The result class: cn.mops's CNVDetectionResult, slot for slot (cn.mops 1.53). When cn.mops is
# installed, gcn.mops() returns cn.mops's own class instead (see .result_class()); the accessors of this
# package work on both.

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
           sampleNames       = vector("character", 1)))

# The class a new result gets: cn.mops's when it is installed (option gcn.mops.cnmopsClass = FALSE
# forces this package's own definition).
.result_class <- function() {
  if (isTRUE(getOption("gcn.mops.cnmopsClass", TRUE)) &&
      suppressWarnings(requireNamespace("cn.mops", quietly = TRUE)))
    return(methods::getClass("CNVDetectionResult", where = asNamespace("cn.mops")))
  methods::getClass("CNVDetectionResult", where = asNamespace("gcn.mops"))
}

.is_result <- function(object)
  isS4(object) && identical(as.character(class(object)), "CNVDetectionResult")
