# Case mode: a reference cohort fitted once (buildReference), stored (saveReference / loadReference) and new
# samples called against it (gcn.mops(newSamples, reference = ref, mode = "frozen" | "refit")). The engine's
# gcnmops.build_reference / Reference.save / load_reference / call_samples do the work (gcnmops.rbridge's
# reference_*_from_r); R holds a CNVReference: the engine's handle of the reference in this session, the
# folder it is stored in (if any) and a summary.

setClass("CNVReference",
         representation = representation(
           handle      = "character",   # the engine's handle (this session); "" when none
           path        = "character",   # the store's folder; "" when not saved
           method      = "character",
           nRegions    = "integer",
           sampleNames = "character",
           classes     = "character",
           keepCounts  = "logical",
           sexAware    = "logical",
           session     = "character"),  # the R session (pid) the handle belongs to
         prototype = prototype(handle = "", path = "", method = "cn.mops", nRegions = 0L,
                               sampleNames = character(), classes = character(), keepCounts = FALSE,
                               sexAware = FALSE, session = ""))

setMethod("show", "CNVReference", function(object) {
  cat("An object of class \"CNVReference\" (gcn.mops)\n")
  cat(sprintf("%s reference: %d regions x %d samples, classes %s\n", object@method, object@nRegions,
              length(object@sampleNames), paste(object@classes, collapse = " ")))
  s <- object@sampleNames
  cat("samples: ", paste(if (length(s) > 6L) c(utils::head(s, 6L), "...") else s, collapse = " "), "\n", sep = "")
  cat(sprintf("counts %s (mode \"refit\" %s)%s\n", if (object@keepCounts) "kept" else "not kept",
              if (object@keepCounts) "available" else "needs keepCounts = TRUE",
              if (object@sexAware) ", sex-aware" else ""))
  cat("stored: ", if (nzchar(object@path)) object@path else "no (in this session only; saveReference(ref, path))",
      "\n", sep = "")
  invisible(object)
})

.session_id <- function() as.character(Sys.getpid())

.reference_object <- function(res) {
  new("CNVReference", handle = as.character(res$handle), path = as.character(res$path),
      method = as.character(res$method), nRegions = as.integer(res$n_regions),
      sampleNames = as.character(unlist(res$sample_names)), classes = as.character(unlist(res$classes)),
      keepCounts = isTRUE(res$has_counts), sexAware = isTRUE(res$sex_aware), session = .session_id())
}

# The bridge entries naming a reference: the handle only in the session that made it.
.reference_env <- function(ref) {
  if (!methods::is(ref, "CNVReference"))
    stop("\"reference\" must be a CNVReference (buildReference() or loadReference()).", call. = FALSE)
  env <- new.env(parent = emptyenv())
  env$handle <- if (identical(ref@session, .session_id())) ref@handle else ""
  env$path <- ref@path
  env
}

.reference_methods <- c("cn.mops" = "gcn.mops", exome = "exomegcn.mops", haplo = "haplogcn.mops")
.reference_main <- c("cn.mops" = "CN2", exome = "CN2", haplo = "CN1")

buildReference <- function(input, ..., method = c("cn.mops", "exome", "haplo"), keepCounts = FALSE, path = NULL,
                           sexAware = FALSE, sex = NULL, genome = "hg38",
                           backend = getOption("gcn.mops.backend", "auto")) {
  method <- match.arg(method)
  if (!(is.logical(keepCounts) && length(keepCounts) == 1L && !is.na(keepCounts)))
    stop("\"keepCounts\" must be TRUE or FALSE.")
  if (!is.null(path) && !(is.character(path) && length(path) == 1L && nzchar(path)))
    stop("\"path\" must be a folder name (character of length 1) or NULL.")
  if (!(is.character(backend) && length(backend) == 1L && backend %in% c("auto", "cpu", "gpu")))
    stop("\"backend\" must be \"auto\", \"cpu\" or \"gpu\".")
  dots <- list(...)
  if (length(dots) && (is.null(names(dots)) || any(!nzchar(names(dots)))))
    stop("cn.mops's parameters are given by name (priorImpact = 1, minWidth = 3, ...).")
  # cn.mops's parameters (the method's defaults overridden by the user's), checked as the method checks them;
  # the others are the segmentation's (as gcn.mops()'s ...)
  f <- formals(get(.reference_methods[[method]], envir = asNamespace("gcn.mops")))
  pnames <- setdiff(names(f), c("input", "...", "backend", "devices", "gpu"))
  given <- dots[intersect(names(dots), pnames)]
  seg <- dots[setdiff(names(dots), pnames)]
  a <- lapply(f[pnames], eval, envir = baseenv())
  a[names(given)] <- given
  .check_args(a, main = .reference_main[[method]])
  d <- .prepare_input(input)
  .engine()
  seg <- .with_seed(seg, a$segAlgorithm)
  env <- new.env(parent = emptyenv())
  for (nm in c("X", "sampleNames", "chr_levels", "start", "end")) env[[nm]] <- d[[nm]]
  if (d$input_type == "GRanges") env$chr_index <- d$chr_index
  env$min_samples <- 2L
  given$segment_args <- seg
  env$args <- given
  env$method <- method
  env$keepCounts <- keepCounts
  env$sexAware <- isTRUE(sexAware)
  env$sex <- if (is.null(sex)) NULL else as.character(sex)
  env$genome <- if (is.null(genome)) "none" else as.character(genome)
  env$backend <- backend
  env$path <- if (is.null(path)) NULL else path.expand(path)
  .reference_object(.call_engine("reference_build_from_r", env))
}

saveReference <- function(ref, path) {
  env <- .reference_env(ref)
  if (!(is.character(path) && length(path) == 1L && nzchar(path)))
    stop("\"path\" must be a folder name (character of length 1).")
  env$to <- path.expand(path)
  invisible(.reference_object(.call_engine("reference_save_from_r", env)))
}

loadReference <- function(path) {
  if (!(is.character(path) && length(path) == 1L && nzchar(path)))
    stop("\"path\" must be a folder name (character of length 1).")
  env <- new.env(parent = emptyenv())
  env$path <- normalizePath(path.expand(path), mustWork = FALSE)
  .reference_object(.call_engine("reference_load_from_r", env))
}

# gcn.mops(newSamples, reference = ref, mode = ...): the new samples against the reference (its parameters).
.gcn_mops_reference <- function(input, reference, mode, dots, parallel, backend) {
  mode <- match.arg(mode, c("frozen", "refit"))
  if (!(is.character(backend) && length(backend) == 1L && backend %in% c("auto", "cpu", "gpu")))
    stop("\"backend\" must be \"auto\", \"cpu\" or \"gpu\".")
  env <- .reference_env(reference)
  d <- .prepare_input(input, min_samples = 1L, vector_is_sample = TRUE)
  .engine()
  for (nm in c("X", "sampleNames", "chr_levels", "start", "end")) env[[nm]] <- d[[nm]]
  if (d$input_type == "GRanges") env$chr_index <- d$chr_index
  env$min_samples <- 1L
  env$mode <- mode
  env$sex <- if (is.null(dots$sex)) NULL else as.character(dots$sex)
  env$integer <- isTRUE(dots$integer)
  env$parallel <- parallel
  env$backend <- backend
  res <- .call_engine("reference_call_from_r", env)
  .state$last_run <- res
  if (d$input_type == "GRanges") env$seqinfo <- d$seqinfo
  p <- env$params
  p$caseMode <- res$caseMode
  if (!is.null(res$sex)) p$sex <- stats::setNames(unlist(res$sex), d$sampleNames)
  env$params <- p
  .build_result(env)
}
