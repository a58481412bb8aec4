# One result class whose saved objects load, validate and work in a session with cn.mops alone, gcn.mops alone,
# or both (AllClasses.R); results saved by the gcn.MOPS thesis package (class of package "gcn.mops") too. cn.mops is not installed here: a stub package "cn.mops" defining CNVDetectionResult
# with cn.mops's slots (and a function that assigns a slot and validates, as cn.mops's makeRobustCNVR and
# calcIntegerCopyNumbers do) stands for it, installed in a temporary library. Each session is a new R process
# whose library path holds only the packages it is meant to have.

.stub_cnmops <- function(lib) {
  src <- file.path(tempfile("stub"), "cn.mops")
  dir.create(file.path(src, "R"), recursive = TRUE)
  writeLines(c("Package: cn.mops", "Version: 1.53.0", "Title: Stand-in for cn.mops in gcn.mops's tests",
               "Description: The result class of cn.mops, slot for slot.", "License: LGPL (>= 2)",
               "Depends: methods, GenomicRanges"), file.path(src, "DESCRIPTION"))
  writeLines(c("import(methods)", "importFrom(GenomicRanges, GRanges)", "exportClasses(CNVDetectionResult)",
               "exportMethods(show)", "export(touch)"), file.path(src, "NAMESPACE"))
  writeLines(c(
    'setClass("CNVDetectionResult", representation(gr = "GRanges", normalizedData = "matrix",',
    '  localAssessments = "matrix", individualCall = "matrix", iniCall = "numeric", posteriorProbs = "array",',
    '  cnvs = "GRanges", cnvr = "GRanges", segmentation = "GRanges", integerCopyNumber = "matrix",',
    '  params = "list", sampleNames = "character"))',
    'setMethod("show", "CNVDetectionResult", function(object) cat("cn.mops stand-in result\\n"))',
    'touch <- function(object) { object@cnvr <- object@cnvr; validObject(object); object }'),
    file.path(src, "R", "class.R"))
  out <- system2(file.path(R.home("bin"), "R"), c("CMD", "INSTALL", "--no-test-load", "--no-docs", "--no-byte-compile", "-l", shQuote(lib),
                                                 shQuote(src)),
                 stdout = TRUE, stderr = TRUE)
  if (!dir.exists(file.path(lib, "cn.mops"))) stop(paste(out, collapse = "\n"))
}

# Libraries: "deps" links every installed package but cn.mops and gcn.mops; "gcn" links this gcn.mops.
.session_libs <- function(root) {
  libs <- c(deps = file.path(root, "deps"), gcn = file.path(root, "gcn"), stub = file.path(root, "stub"))
  for (l in libs) dir.create(l)
  for (lib in .libPaths()) for (p in list.files(lib)) {
    if (p %in% c("cn.mops", "gcn.mops") || file.exists(file.path(libs[["deps"]], p))) next
    file.symlink(file.path(lib, p), file.path(libs[["deps"]], p))
  }
  file.symlink(system.file(package = "gcn.mops"), file.path(libs[["gcn"]], "gcn.mops"))
  .stub_cnmops(libs[["stub"]])
  libs
}

# Runs `code` in a new R process with `libs` (then "deps") as its library path; the process saves its
# findings (a plain list) as "found" into out.rds, read back here.
.in_session <- function(libs, pkgs, code, dir) {
  script <- file.path(dir, "session.R")
  writeLines(c(sprintf('setwd("%s")', dir), "found <- list()", sprintf("for (p in c(%s)) suppressPackageStartupMessages(library(p, character.only = TRUE))",
                                          paste0('"', pkgs, '"', collapse = ", ")),
               "found$installed <- c(cn.mops = nzchar(system.file(package = 'cn.mops')),",
               "                     gcn.mops = nzchar(system.file(package = 'gcn.mops')))",
               code, "saveRDS(found, 'out.rds')"), script)
  unlink(file.path(dir, "out.rds"))
  env <- c(paste0("R_LIBS=", paste(libs[pkgs], collapse = .Platform$path.sep)),
           paste0("R_LIBS_SITE=", libs[["deps"]]), paste0("R_LIBS_USER=", libs[["deps"]]))
  out <- system2(file.path(R.home("bin"), "Rscript"), c("--vanilla", shQuote(script)), env = env,
                 stdout = TRUE, stderr = TRUE)
  if (!file.exists(file.path(dir, "out.rds"))) stop(paste(c("the session failed:", out), collapse = "\n"))
  readRDS(file.path(dir, "out.rds"))
}

test_that("a result validates and works with gcn.mops alone, cn.mops alone, or both; cn.mops's results too", {
  skip_if_no_engine()
  d <- cn_data()
  root <- tempfile("sessions")
  dir.create(root)
  on.exit(unlink(root, recursive = TRUE), add = TRUE)
  libs <- .session_libs(root)
  names(libs)[names(libs) == "gcn"] <- "gcn.mops"
  names(libs)[names(libs) == "stub"] <- "cn.mops"
  # a result made here; its class attribute names no package
  r <- suppressMessages(calcIntegerCopyNumbers(gcn.mops(d$XRanges[1:1500, 1:12])))
  expect_null(attr(class(r), "package"))
  expect_true(validObject(r))
  saveRDS(r, file.path(root, "gcn.rds"))
  saveRDS(d$XRanges[1:1500, 1:12], file.path(root, "input.rds"))

  # cn.mops alone: gcn.mops's saved result validates and takes cn.mops's slot assignments; a result with
  # cn.mops's own class attribute is saved for the next sessions
  found <- .in_session(libs, "cn.mops", c(
    'r <- readRDS("gcn.rds")', 'found$valid <- isTRUE(validObject(r))',
    'found$touched <- isTRUE(validObject(cn.mops::touch(r)))', 'found$show <- capture.output(show(r))',
    'x <- new("CNVDetectionResult")', 'for (s in slotNames(x)) slot(x, s) <- slot(r, s)',
    'found$package <- attr(class(x), "package")', 'saveRDS(x, "cnmops.rds")'), root)
  expect_identical(found$installed, c(cn.mops = TRUE, gcn.mops = FALSE))
  expect_true(found$valid)
  expect_true(found$touched)
  expect_identical(found$show, "cn.mops stand-in result")
  expect_identical(found$package, "cn.mops")

  # gcn.mops alone: its own results validate through calcIntegerCopyNumbers and makeRobustCNVR; cn.mops's
  # saved result loads, works with every function, and validates after updateObject()
  found <- .in_session(libs, "gcn.mops", c(
    'x <- readRDS("input.rds")',
    'r <- suppressMessages(calcIntegerCopyNumbers(gcn.mops(x)))',
    'found$valid <- c(isTRUE(validObject(r)), isTRUE(validObject(makeRobustCNVR(r))))',
    'found$show <- capture.output(show(r))',
    'found$cnvr <- as.data.frame(cnvr(r))',
    'cm <- readRDS("cnmops.rds")',
    'found$c_raw <- tryCatch(validObject(cm), error = function(e) conditionMessage(e))',
    'found$c_valid <- c(isTRUE(validObject(updateObject(cm))),',
    '                   isTRUE(validObject(calcIntegerCopyNumbers(cm))), isTRUE(validObject(makeRobustCNVR(cm))))',
    'found$c_show <- capture.output(show(cm))',
    'found$c_same <- identical(integerCopyNumber(cm), integerCopyNumber(r)) &&',
    '  identical(as.data.frame(cnvr(calcIntegerCopyNumbers(cm))), found$cnvr)',
    'th <- r', 'attr(th, "class") <- structure("CNVDetectionResult", package = "gcn.mops")',   # as the thesis saved it
    'found$thesis <- c(isTRUE(validObject(th)), isTRUE(validObject(calcIntegerCopyNumbers(th))))',
    'saveRDS(r, "gcn2.rds")'), root)
  expect_identical(found$installed, c(cn.mops = FALSE, gcn.mops = TRUE))
  expect_identical(found$valid, c(TRUE, TRUE))
  expect_match(found$show[1], "CNVDetectionResult", fixed = TRUE)
  expect_identical(found$cnvr, as.data.frame(cnvr(r)))
  expect_match(found$c_raw, "cn.mops", fixed = TRUE)   # cn.mops's class attribute needs cn.mops: updateObject()
  expect_identical(found$c_valid, c(TRUE, TRUE, TRUE))
  expect_identical(found$c_show, capture.output(show(r)))
  expect_true(found$c_same)
  expect_identical(found$thesis, c(TRUE, TRUE))   # results saved by the gcn.MOPS thesis package (package "gcn.mops")

  # both, in either order: every saved result validates, under either package's functions
  for (pkgs in list(c("gcn.mops", "cn.mops"), c("cn.mops", "gcn.mops"))) {
    found <- .in_session(libs, pkgs, c(
      'for (f in c("gcn.rds", "gcn2.rds", "cnmops.rds")) {', '  r <- readRDS(f)',
      '  found[[f]] <- c(isTRUE(validObject(r)), isTRUE(validObject(cn.mops::touch(r))),',
      '                  isTRUE(validObject(BiocGenerics::updateObject(r))), length(capture.output(show(r))) > 0)', '}'), root)
    expect_identical(found$installed, c(cn.mops = TRUE, gcn.mops = TRUE))
    for (f in c("gcn.rds", "gcn2.rds", "cnmops.rds")) expect_identical(found[[f]], rep(TRUE, 4), info = paste(pkgs, f))
  }
})
