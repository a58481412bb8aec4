# cn.mops's argument checks, one row per check: the call, the message cn.mops gives, and whether gcn.mops stops
# with exactly that message. `src` says where the expected text comes from:
#   "spec": quoted in the cn.mops behaviour spec (shared/spec/*.md) - cn.mops's words;
#   "spec-prefix": the spec quotes only the beginning (it elides the rest with "..."): the message must begin so;
#   "gcn.mops": the spec names the check but quotes no text - gcn.mops's text is pinned here so that a change
#     is deliberate.
# A trailing newline (which cn.mops puts at the end of some messages) is not compared. Rows marked engine = TRUE
# reach the Python engine (a result is needed, or the engine makes the check) and are skipped without it; the
# others are R's own checks, made before the engine is looked for (they run without the engine).

.msg_data <- function() {
  set.seed(17)
  m <- 200L
  x <- matrix(stats::rpois(m * 6L, 60), m, 6L, dimnames = list(NULL, paste0("S", 1:6)))
  x[60:80, 1] <- stats::rpois(21L, 3)   # a deletion in sample 1: cn.mops calls a CNV there
  gr <- GenomicRanges::GRanges("chr1", IRanges::IRanges(seq(1L, by = 1000L, length.out = m), width = 1000L))
  S4Vectors::mcols(gr) <- as.data.frame(x)
  two <- rep(c("chrA", "chrB"), each = m / 2L)
  e <- new.env()
  e$x <- x
  e$gr <- gr
  e$two <- two
  e
}

# The message of the error `expr` raises (NA when it raises none); warnings and messages muffled.
.error_text <- function(expr) {
  tryCatch({ suppressWarnings(suppressMessages(force(expr))); NA_character_ },
           error = function(e) sub("\n$", "", conditionMessage(e)))
}

ALL_VALUES <- "All values must be greater or equal zero and finite."
INPUT <- "GRanges object or read count matrix needed as input."
num1 <- function(a) sprintf("\"%s\" must be numeric and of length 1.", a)

# id, call, expected message, source, needs the engine
CHECKS <- list(
  # cn.mops(): the input
  list("input data.frame", quote(gcn.mops(data.frame(a = 1:3, b = 1:3))), INPUT, "spec"),
  list("input list", quote(gcn.mops(list(1, 2))), INPUT, "spec"),
  list("input character matrix", quote(gcn.mops(matrix(letters[1:6], 3))), ALL_VALUES, "gcn.mops"),
  list("one GRanges sample", quote(gcn.mops(gr[, 1])), "It is not possible to run cn.mops on only ONE sample.",
       "gcn.mops"),
  list("strands", quote({ g <- gr; BiocGenerics::strand(g) <- rep(c("+", "-"), 100); gcn.mops(g) }),
       "Different strands found in GRanges object. Please make read counts independent of strand.", "gcn.mops"),
  list("negative count", quote({ y <- x; y[3, 2] <- -1L; gcn.mops(y) }), ALL_VALUES, "gcn.mops"),
  list("NA count", quote({ y <- x; y[3, 2] <- NA; gcn.mops(y) }), ALL_VALUES, "gcn.mops"),
  list("NaN count", quote({ y <- x * 1; y[3, 2] <- NaN; gcn.mops(y) }), ALL_VALUES, "gcn.mops"),
  list("Inf count", quote({ y <- x * 1; y[3, 2] <- Inf; gcn.mops(y) }), ALL_VALUES, "gcn.mops"),
  list("negative count in GRanges", quote({ g <- gr; S4Vectors::mcols(g)$S2[5] <- -3L; gcn.mops(g) }), ALL_VALUES,
       "gcn.mops"),
  # cn.mops(): the parameters
  list("I not numeric", quote(gcn.mops(x, I = "a")), "\"I\" must be numeric.", "gcn.mops"),
  list("classes not character", quote(gcn.mops(x, classes = 1:9)), "\"classes\" must be character.", "gcn.mops"),
  list("I and classes lengths", quote(gcn.mops(x, I = c(1, 2))), "I and classes must have same length!", "gcn.mops"),
  list("no CN2", quote(gcn.mops(x, classes = paste0("C", 0:8))), "One element of classes must be CN2 .", "gcn.mops"),
  list("priorImpact", quote(gcn.mops(x, priorImpact = c(1, 2))), "\"priorImpact\" be must numeric and of length 1.",
       "gcn.mops"),
  list("cyc", quote(gcn.mops(x, cyc = "a")), num1("cyc"), "gcn.mops"),
  list("parallel", quote(gcn.mops(x, parallel = NULL)), num1("parallel"), "gcn.mops"),
  list("normType", quote(gcn.mops(x, normType = "foo")),
       "Set normalization to \"mean\" \"min\", \"median\", \"quant\" or \"mode\".", "gcn.mops"),
  list("normQu", quote(gcn.mops(x, normQu = "a")), num1("normQu"), "gcn.mops"),
  list("norm 3", quote(gcn.mops(x, norm = 3)), "\"norm\" must be 0,1 or 2.", "gcn.mops"),
  list("norm vector", quote(gcn.mops(x, norm = c(0, 1))), "\"norm\" must be 0,1 or 2.", "gcn.mops"),
  list("lowerThreshold", quote(gcn.mops(x, lowerThreshold = numeric())), num1("lowerThreshold"), "gcn.mops"),
  list("upperThreshold", quote(gcn.mops(x, upperThreshold = "a")), num1("upperThreshold"), "gcn.mops"),
  list("minWidth", quote(gcn.mops(x, minWidth = NULL)), num1("minWidth"), "gcn.mops"),
  list("segAlgorithm", quote(gcn.mops(x, segAlgorithm = 1)), "\"segAlgorithm\" must be \"fastseg\" or \"DNAcopy\"!",
       "gcn.mops"),
  list("minReadCount", quote(gcn.mops(x, minReadCount = "5")), num1("minReadCount"), "gcn.mops"),
  list("returnPosterior", quote(gcn.mops(x, returnPosterior = "yes")), "\"returnPosterior\" must be logical.",
       "gcn.mops"),
  # the checks' order (spec: input, strands, counts, I, classes, lengths, CN2, the numeric parameters)
  list("order: ONE sample before counts", quote({ g <- gr[, 1]; S4Vectors::mcols(g)[1, 1] <- -1L; gcn.mops(g) }),
       "It is not possible to run cn.mops on only ONE sample.", "gcn.mops"),
  list("order: counts before I", quote({ y <- x; y[1, 1] <- -1L; gcn.mops(y, I = "a") }), ALL_VALUES, "gcn.mops"),
  list("order: I before classes", quote(gcn.mops(x, I = "a", classes = 1)), "\"I\" must be numeric.", "gcn.mops"),
  list("order: classes before length", quote(gcn.mops(x, I = 1, classes = 1)), "\"classes\" must be character.",
       "gcn.mops"),
  list("order: length before CN2", quote(gcn.mops(x, I = 1, classes = c("A", "B"))),
       "I and classes must have same length!", "gcn.mops"),
  list("order: CN2 before priorImpact", quote(gcn.mops(x, classes = paste0("C", 0:8), priorImpact = "a")),
       "One element of classes must be CN2 .", "gcn.mops"),
  # the family
  list("exomecn.mops input", quote(exomegcn.mops(data.frame(a = 1))), INPUT, "spec"),
  list("exomecn.mops priorImpact", quote(exomegcn.mops(x, priorImpact = "a")),
       "\"priorImpact\" be must numeric and of length 1.", "gcn.mops"),
  list("haplocn.mops no CN1", quote(haplogcn.mops(x, classes = paste0("C", 0:8))),
       "One element of classes must be CN1 .", "spec"),
  list("haplocn.mops input", quote(haplogcn.mops(list(1))), INPUT, "spec"),
  list("haplocn.mops counts", quote({ y <- x; y[2, 2] <- NA; haplogcn.mops(y) }), ALL_VALUES, "gcn.mops"),
  list("referencecn.mops cases input", quote(referencegcn.mops(data.frame(a = 1), x)), INPUT, "spec"),
  list("referencecn.mops controls input", quote(referencegcn.mops(x, data.frame(a = 1))), INPUT, "spec"),
  list("referencecn.mops cases counts", quote({ y <- x; y[1, 1] <- -1L; referencegcn.mops(y, x) }), ALL_VALUES,
       "gcn.mops"),
  list("referencecn.mops controls counts", quote({ y <- x; y[1, 1] <- -1L; referencegcn.mops(x, y) }), ALL_VALUES,
       "gcn.mops"),
  list("referencecn.mops GRanges lengths", quote(referencegcn.mops(gr[1:100, 1:2], gr[1:99, 3:6])),
       "Cases and controls must have the same length.", "spec"),
  list("referencecn.mops matrix rows", quote(referencegcn.mops(x[1:100, 1:2], x[1:99, 3:6])),
       "Cases and controls must have the same length.", "spec"),
  list("referencecn.mops GRanges ranges", quote(referencegcn.mops(gr[1:100, 1:2], gr[2:101, 3:6])),
       "Cases and controls must have the same ranges.", "spec-prefix"),
  list("referencecn.mops no CN2", quote(referencegcn.mops(x[, 1:2], x[, 3:6], classes = paste0("C", 0:12))),
       "One element of classes must be CN2 .", "gcn.mops"),
  list("singlecn.mops input", quote(singlegcn.mops(data.frame(a = 1))), INPUT, "spec"),
  list("singlecn.mops counts", quote(singlegcn.mops(c(1, 2, -1))), ALL_VALUES, "gcn.mops"),
  list("singlecn.mops several samples", quote(singlegcn.mops(x)),
       "More than one sample detected (6 sample columns).", "gcn.mops-prefix", TRUE),
  # normalizeChromosomes / normalizeGenome
  list("normalizeChromosomes input", quote(normalizeChromosomes(data.frame(a = 1))), INPUT, "spec"),
  list("normalizeChromosomes chr length", quote(normalizeChromosomes(x, chr = "chrA")),
       "Length of \"chr\" must be equal to number of rows of \"X\".", "gcn.mops"),
  list("normalizeChromosomes NA", quote({ y <- x; y[4, 3] <- NA; normalizeChromosomes(y) }),
       "NAs in readcount matrix.", "spec", TRUE),
  list("normalizeChromosomes zero column", quote({ y <- x; y[, 3] <- 0L; normalizeChromosomes(y) }),
       "Zero columns in readcount matrix.", "spec", TRUE),
  list("normalizeChromosomes zero size factor",
       quote({ y <- x; y[1:100, 2] <- 0L; normalizeChromosomes(y, chr = two) }),
       "Some normalization factors are zero!", "spec-prefix", TRUE),
  list("normalizeGenome NA", quote({ y <- x; y[4, 3] <- NA; normalizeGenome(y) }), "NAs in readcount matrix.",
       "spec", TRUE),
  list("normalizeGenome zero column", quote({ y <- x; y[, 3] <- 0L; normalizeGenome(y) }),
       "Zero columns in readcount matrix.", "spec", TRUE),
  # the results' methods
  list("calcIntegerCopyNumbers without CNVs",
       quote(calcIntegerCopyNumbers(gcn.mops(x, upperThreshold = 100, lowerThreshold = -100))),
       "No CNV regions in result object. Rerun cn.mops with different parameters!", "spec", TRUE),
  list("calcFractionalCopyNumbers of cn.mops", quote(calcFractionalCopyNumbers(gcn.mops(x))),
       "Only possible for referencecn.mops!", "spec", TRUE),
  list("makeRobustCNVR robust", quote(makeRobustCNVR(gcn.mops(x), robust = "a")), num1("robust"), "gcn.mops", TRUE),
  list("makeRobustCNVR minWidth", quote(makeRobustCNVR(gcn.mops(x), minWidth = "a")), num1("minWidth"), "gcn.mops",
       TRUE),
  list("segment x", quote(segment("a")), "x must be numeric.", "gcn.mops"),
  list("segment alpha", quote(segment(c(1, 2, 3), alpha = "a")), num1("alpha"), "gcn.mops"),
  list("segment minSeg", quote(segment(c(1, 2, 3), minSeg = NULL)), num1("minSeg"), "gcn.mops")
)

test_that("every argument check stops with cn.mops's message", {
  e <- .msg_data()
  for (row in CHECKS) {
    id <- row[[1L]]
    if (length(row) >= 5L && isTRUE(row[[5L]]) && !isTRUE(.engine_ok())) next
    got <- .error_text(eval(row[[2L]], envir = e))
    want <- row[[3L]]
    if (endsWith(row[[4L]], "prefix")) {
      expect_true(!is.na(got) && startsWith(got, want),
                  label = sprintf("%s: %s begins with %s", id, encodeString(got, quote = "'"), encodeString(want, quote = "'")))
    } else {
      expect_identical(got, want, label = id)
    }
  }
})

test_that("cn.mops's warnings and notes, word for word", {
  skip_if_no_engine()
  e <- .msg_data()
  # the spec's warning for fewer than 100 regions
  expect_warning(suppressMessages(gcn.mops(e$x[1:50, ])),
                 "^Normalization might not be applicable for this small number of segments\\.$")
  # no CNV segment: cn.mops's message, an empty cnvr
  msgs <- character()
  r <- withCallingHandlers(gcn.mops(e$x, upperThreshold = 100, lowerThreshold = -100),
                           message = function(m) { msgs <<- c(msgs, conditionMessage(m)); invokeRestart("muffleMessage") })
  expect_true("No CNVs detected. Try changing \"normalization\", \"priorImpact\" or \"thresholds\"." %in%
                sub("\n$", "", msgs), label = paste(msgs, collapse = " | "))
  expect_length(r@cnvr, 0L)
  # referencecn.mops's note on its defaults (the spec's words, within the message)
  msgs <- character()
  withCallingHandlers(referencegcn.mops(e$x[, 1:2], e$x[, 3:6], segAlgorithm = "fast"),
                      message = function(m) { msgs <<- c(msgs, conditionMessage(m)); invokeRestart("muffleMessage") })
  expect_true(any(grepl("The default parameters are adjusted for \"tumor-vs-normal\"!", msgs, fixed = TRUE)),
              label = paste(msgs, collapse = " | "))
})

test_that("norm = 0 and singlecn.mops keep cn.mops's types of normalizedData", {
  skip_if_no_engine()
  e <- .msg_data()
  # golden xranges_norm0_posterior: cn.mops(X[1:1500, ], norm=0) on integer counts stores a double matrix
  r <- suppressMessages(gcn.mops(e$x, norm = 0))
  expect_identical(typeof(r@normalizedData), "double")
  expect_identical(unname(r@normalizedData), unname(e$x * 1))
  # golden single_xranges: singlecn.mops(XRanges[, 1]) stores the integer counts as given
  r1 <- suppressMessages(singlegcn.mops(e$gr[, 1]))
  expect_identical(typeof(r1@normalizedData), "integer")
  expect_identical(as.vector(r1@normalizedData), S4Vectors::mcols(e$gr)[[1L]])
  r2 <- suppressMessages(singlegcn.mops(e$x[, 1] * 1))
  expect_identical(typeof(r2@normalizedData), "double")
})
