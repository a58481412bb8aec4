# The result class: cn.mops's CNVDetectionResult, slot for slot (cn.mops 1.53), defined in this package.
#
# A result is handed out with its class given by name only (.portable()): the class attribute
# "CNVDetectionResult" without the "package" attribute that new() puts on it. R's methods package resolves
# a class attribute that names a package through that package's namespace: getClassDef() takes the cached
# definition only when its package matches, and validObject() and `@<-` (checkAtAssignment) then look the
# slot classes up in .classEnv(), i.e. .requirePackage(<package>), which fails with "unable to find required
# package" where that package is not installed. A class given by name is found in the class cache whichever
# package of the session defined it: cn.mops, gcn.mops (this one or the gcn.MOPS thesis package of the same
# name), or both (same slots: methods keeps one definition, .simpleDuplicateClass). So a result made or
# saved by gcn.mops loads, validates and works in a session with cn.mops alone, gcn.mops alone, or both.
# Results saved by cn.mops itself (package "cn.mops") load anywhere; where cn.mops is not installed, every
# gcn.mops function that modifies a result takes them as its own (.portable()), and updateObject() gives
# the portable copy that validObject() accepts.

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

# The class a new result gets (the same one whichever package is loaded).
.result_class <- function() methods::getClass("CNVDetectionResult", where = asNamespace("gcn.mops"))

# The result with its class by name only (see above); its slots are shared, not copied.
.portable <- function(object) {
  attr(object, "class") <- "CNVDetectionResult"
  object
}

.is_result <- function(object)
  isS4(object) && identical(as.character(class(object)), "CNVDetectionResult")
