# normalizeChromosomes() / normalizeGenome() with cn.mops's arguments; the engine normalizes a
# zero-copy view of the counts into a matrix allocated here. A GRanges gives a GRanges, a matrix a matrix.

normalizeChromosomes <- function(X, chr, normType = "poisson", sizeFactor = "mean", qu = 0.25,
                                 quSizeFactor = 0.75, ploidy) {
  .normalize(X, if (missing(chr)) NULL else chr, normType, sizeFactor, qu, quSizeFactor,
             if (missing(ploidy)) NULL else ploidy, genome = FALSE)
}

normalizeGenome <- function(X, normType = "poisson", sizeFactor = "mean", qu = 0.25, quSizeFactor = 0.75,
                            ploidy) {
  .normalize(X, NULL, normType, sizeFactor, qu, quSizeFactor, if (missing(ploidy)) NULL else ploidy,
             genome = TRUE)
}

.normalize <- function(X, chr, normType, sizeFactor, qu, quSizeFactor, ploidy, genome) {
  input <- X
  if (methods::is(X, "GRanges")) {
    if (is.null(chr)) chr <- as.character(seqnames(X))
    cols <- as.list(mcols(X))
    M <- numeric(length(X) * length(cols))
    dim(M) <- c(length(X), length(cols))
    for (k in seq_along(cols)) M[, k] <- as.vector(cols[[k]])
    colnames(M) <- names(cols)
  } else if (is.matrix(X) || is.vector(X)) {
    M <- X
    if (is.vector(M)) dim(M) <- c(length(M), 1L)
    if (!is.double(M)) storage.mode(M) <- "double"
  } else {
    stop("GRanges object or read count matrix needed as input.")
  }
  if (!genome) {
    if (is.null(chr)) chr <- rep("undef", nrow(M))
    if (length(chr) != nrow(M)) stop("Length of \"chr\" must be equal to number of rows of \"X\".")
  }
  env <- new.env(parent = emptyenv())
  env$X <- M
  env$chr <- if (genome) NULL else as.character(chr)
  env$normType <- normType
  env$sizeFactor <- sizeFactor
  env$qu <- qu
  env$quSizeFactor <- quSizeFactor
  env$ploidy <- if (is.null(ploidy)) NULL else as.double(ploidy)
  out <- .alloc("double", dim(M), dimnames(M))
  env$out <- out
  .call_engine("normalize_from_r", env)
  if (methods::is(input, "GRanges")) {
    res <- input
    vals <- S4Vectors::mcols(res)
    for (k in seq_len(ncol(out))) vals[[k]] <- out[, k]
    S4Vectors::mcols(res) <- vals
    return(res)
  }
  if (is.vector(input)) return(as.vector(out))
  out
}
