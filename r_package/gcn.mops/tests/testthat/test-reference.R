# Case mode from R: buildReference() on a cohort of XRanges, the held-out sample called against it with
# gcn.mops(newSample, reference = ref, mode = "frozen" | "refit"); saveReference() / loadReference().

.pkg_data <- local({
  e <- NULL
  function() {
    if (is.null(e)) { e <<- new.env(); utils::data("cn.mops", package = "gcn.mops", envir = e) }
    e
  }
})

test_that("refit equals gcn.mops on the combined cohort; frozen has the shape of a result", {
  skip_if_no_engine()
  x <- .pkg_data()$XRanges
  n <- ncol(S4Vectors::mcols(x))
  ref <- suppressMessages(buildReference(x[, seq_len(n - 1L)], keepCounts = TRUE, backend = "cpu"))
  expect_s4_class(ref, "CNVReference")
  expect_identical(ref@nRegions, length(x))
  expect_identical(ref@sampleNames, colnames(S4Vectors::mcols(x))[seq_len(n - 1L)])
  expect_true(ref@keepCounts)
  expect_output(show(ref), "cn.mops reference: 5000 regions x 39 samples", fixed = TRUE)
  new <- x[, n]
  name <- colnames(S4Vectors::mcols(x))[n]

  refit <- suppressMessages(gcn.mops(new, reference = ref, mode = "refit", backend = "cpu"))
  full <- suppressMessages(gcn.mops(x, backend = "cpu"))
  expect_s4_class(refit, "CNVDetectionResult")
  expect_identical(refit@sampleNames, name)
  expect_identical(refit@localAssessments, full@localAssessments[, name, drop = FALSE])
  expect_identical(refit@normalizedData, full@normalizedData[, name, drop = FALSE])
  expect_identical(refit@integerCopyNumber, full@integerCopyNumber[, name, drop = FALSE])
  expect_identical(refit@iniCall, full@iniCall)
  expect_identical(as.character(refit@cnvs$sampleName), rep(name, length(refit@cnvs)))
  fc <- full@cnvs[as.character(full@cnvs$sampleName) == name]
  expect_identical(BiocGenerics::start(refit@cnvs), BiocGenerics::start(fc))
  expect_identical(refit@params$caseMode$mode, "refit")

  frozen <- suppressMessages(gcn.mops(new, reference = ref, mode = "frozen", backend = "cpu"))
  expect_s4_class(frozen, "CNVDetectionResult")
  expect_identical(slotNames(frozen), slotNames(full))
  expect_identical(frozen@sampleNames, name)
  expect_identical(dim(frozen@localAssessments), c(length(x), 1L))
  expect_identical(dimnames(frozen@localAssessments), dimnames(refit@localAssessments))
  expect_identical(dim(frozen@integerCopyNumber), c(length(x), 1L))
  expect_true(all(frozen@integerCopyNumber %in% ref@classes))
  expect_identical(length(frozen@iniCall), length(x))
  expect_identical(length(frozen@gr), length(x))
  expect_identical(frozen@params$caseMode$mode, "frozen")
  expect_true(all(is.finite(frozen@localAssessments)))
  expect_s4_class(localAssessments(frozen), "GRanges")
  # integer copy numbers of frozen calls come from the call (the reference's parameters), not afterwards
  expect_error(calcIntegerCopyNumbers(frozen), "integer = TRUE", fixed = TRUE)
  fi <- suppressMessages(gcn.mops(new, reference = ref, integer = TRUE, backend = "cpu"))
  expect_identical(fi@localAssessments, frozen@localAssessments)
  if (length(fi@cnvs)) expect_true(all(fi@cnvs$CN %in% ref@classes))
  # refit's integer copy numbers (asked for in the call) as calcIntegerCopyNumbers on the combined cohort's
  expect_error(calcIntegerCopyNumbers(refit), "integer = TRUE", fixed = TRUE)
  if (length(refit@cnvs)) {
    ri <- suppressMessages(gcn.mops(new, reference = ref, mode = "refit", integer = TRUE, backend = "cpu"))
    expect_identical(ri@localAssessments, refit@localAssessments)
    fulli <- suppressMessages(calcIntegerCopyNumbers(full))
    expect_identical(ri@cnvs$CN, fulli@cnvs$CN[as.character(fulli@cnvs$sampleName) == name])
  }
})

test_that("saveReference / loadReference; buildReference(path = ) stores it", {
  skip_if_no_engine()
  x <- .pkg_data()$XRanges
  dir <- tempfile("gcnref")
  dir.create(dir)
  on.exit(unlink(dir, recursive = TRUE), add = TRUE)
  ref <- suppressMessages(buildReference(x[, 1:10], priorImpact = 2, backend = "cpu"))
  expect_false(ref@keepCounts)
  expect_identical(ref@path, "")
  saved <- saveReference(ref, file.path(dir, "a"))
  expect_true(file.exists(file.path(dir, "a", "manifest.json")))
  loaded <- loadReference(file.path(dir, "a"))
  expect_identical(loaded@sampleNames, ref@sampleNames)
  expect_identical(loaded@nRegions, ref@nRegions)
  r1 <- suppressMessages(gcn.mops(x[, 11:12], reference = ref, backend = "cpu"))
  r2 <- suppressMessages(gcn.mops(x[, 11:12], reference = loaded, backend = "cpu"))
  expect_identical(r1@localAssessments, r2@localAssessments)
  expect_identical(r1@params$priorImpact, 2)
  # a reference known only by its folder (e.g. saved with saveRDS and read in another session)
  other <- saved
  other@session <- "elsewhere"
  r3 <- suppressMessages(gcn.mops(x[, 11:12], reference = other, backend = "cpu"))
  expect_identical(r1@localAssessments, r3@localAssessments)
  # refit needs the cohort's counts
  expect_error(suppressMessages(gcn.mops(x[, 11], reference = ref, mode = "refit")), "keepCounts")
  ref2 <- suppressMessages(buildReference(x[, 1:10], keepCounts = TRUE, path = file.path(dir, "b"),
                                          backend = "cpu"))
  expect_identical(ref2@path, path.expand(file.path(dir, "b")))
  expect_true(file.exists(file.path(dir, "b", "counts.npy")))
  expect_error(loadReference(file.path(dir, "nothing")), "is not a gcnmops reference")
})

test_that("mismatched new samples are an R error", {
  skip_if_no_engine()
  x <- .pkg_data()$XRanges
  ref <- suppressMessages(buildReference(x[, 1:10], backend = "cpu"))
  expect_error(suppressMessages(gcn.mops(x[1:4000, 11], reference = ref)), "regions")
  shifted <- x[, 11]
  BiocGenerics::start(shifted)[10] <- BiocGenerics::start(shifted)[10] + 1L
  expect_error(suppressMessages(gcn.mops(shifted, reference = ref)), "regions differ from the reference")
  m <- as.matrix(S4Vectors::mcols(x[, 11]))
  expect_error(suppressMessages(gcn.mops(m, reference = ref)), "genomic ranges")
  expect_error(gcn.mops(x[, 11], reference = "ref"), "must be a CNVReference")
  expect_error(suppressMessages(gcn.mops(x[, 11], reference = ref, mode = "other")), "should be one of")
  expect_warning(suppressMessages(gcn.mops(x[, 11], reference = ref, priorImpact = 3, backend = "cpu")),
                 "ignored: priorImpact")
  expect_error(buildReference(x[, 1:10], classes = paste0("C", 0:8)), "One element of classes must be CN2",
               fixed = TRUE)
})
