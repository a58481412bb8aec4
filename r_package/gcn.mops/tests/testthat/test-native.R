# The package's C routines (src/gcnmops.c): row names, count matrix, labels, result allocation.
# No engine needed.

region_names <- function(g) {
  d <- gcn.mops:::.prepare_input(g)
  d$rownames
}

test_that("row names are cn.mops's paste(seqnames, start, end, sep = \"_\")", {
  chr <- rep(c("chr2", "chr10", "chrX", "chr1"), c(3, 2, 4, 1))
  g <- GenomicRanges::GRanges(chr, IRanges::IRanges(start = c(1, 25001, 50001, 7, 2147483000, 1, 2, 3,
                                                              999999999, 100000),
                                                    width = c(25000, 25000, 10, 1, 647, 1, 1, 1, 1, 5)))
  S4Vectors::mcols(g) <- S4Vectors::DataFrame(a = 1:10, b = 10:1)
  rn <- region_names(g)
  g <- GenomeInfoDb::sortSeqlevels(g)   # as gcn.mops() (and cn.mops) see the regions
  expect_identical(rn, paste(as.character(GenomeInfoDb::seqnames(g)), BiocGenerics::start(g),
                             BiocGenerics::end(g), sep = "_"))
  # the row names of the count matrix, before the engine runs
  d <- gcn.mops:::.prepare_input(g)
  expect_identical(rownames(d$X), rn)
})

test_that("row names are made when read, and behave as a character vector", {
  f <- gcn.mops:::C_gm_region_names
  lev <- c("chr1", "chr2")
  idx <- rep(1:2, c(3000L, 2000L))
  s <- seq_len(5000L) * 100L
  e <- s + 99L
  ref <- paste(lev[idx], s, e, sep = "_")
  expect_identical(.Call(f, lev, idx, s, e)[c(1, 4999)], ref[c(1, 4999)])   # single names
  rn <- .Call(f, lev, idx, s, e)
  expect_identical(rn, ref)                                                  # name by name
  expect_identical(match(ref[4000], rn), 4000L)                              # all of them in memory
  expect_identical(rn, ref)
  expect_false(anyNA(rn))
  expect_identical(sort(.Call(f, lev, idx, s, e)), sort(ref))
  v <- .Call(f, lev, idx, s, e)
  v[2] <- "x"                                                                # modified: a copy or in place
  expect_identical(v, replace(ref, 2, "x"))
  expect_identical(unserialize(serialize(.Call(f, lev, idx, s, e), NULL)), ref)
  m <- matrix(0, 5000, 1, dimnames = list(.Call(f, lev, idx, s, e), "a"))
  m2 <- m
  m2[1, 1] <- 1                                                              # duplicates the dimnames
  expect_identical(rownames(m2), ref)
  expect_identical(rownames(m), ref)
  s[1] <- 7L                                                                 # the names keep the old values
  expect_identical(rn[1], ref[1])
})

test_that("row names: negative coordinates, NA, non-ASCII chromosome names, empty input", {
  f <- gcn.mops:::C_gm_region_names
  lev <- c("chr\u00e4", "2", NA)
  idx <- c(1L, 2L, 3L, 1L)
  s <- c(-5L, 0L, NA, -2147483647L)
  e <- c(-1L, 2147483647L, 3L, 0L)
  expect_identical(.Call(f, lev, idx, s, e), paste(lev[idx], s, e, sep = "_"))
  expect_identical(Encoding(.Call(f, lev, idx, s, e))[1], "UTF-8")
  expect_identical(.Call(f, "chr1", integer(0), integer(0), integer(0)), character(0))
  expect_error(.Call(f, "chr1", 2L, 1L, 1L), "out of range")
  expect_error(.Call(f, "chr1", 1:2, 1L, 1L), "differ in length")
})

test_that("count matrix: integer, logical, double and Rle columns; bad values refused", {
  f <- gcn.mops:::C_gm_count_matrix
  x <- .Call(f, list(1:3, c(TRUE, FALSE, TRUE), c(0.5, 2, 3e9)), c(3L, 3L))
  expect_identical(x, matrix(c(1, 2, 3, 1, 0, 1, 0.5, 2, 3e9), 3))
  expect_identical(.Call(f, list(matrix(1:6, 3)), c(3L, 2L)), matrix(as.double(1:6), 3))   # a whole matrix
  for (bad in list(c(1L, NA), c(1, NaN), c(1, -0.5), c(1, Inf), c(TRUE, NA), c(-1L, 2L)))
    expect_null(.Call(f, list(c(1, 1), bad), c(2L, 2L)))
  expect_identical(.Call(f, list(integer(0), double(0)), c(0L, 2L)), matrix(0, 0, 2))
  expect_identical(.Call(f, list(matrix(0L, 0, 5)), c(0L, 5L)), matrix(0, 0, 5))
  expect_error(.Call(f, list(1:3, "a"), c(3L, 2L)), "not integer, logical or double")
  expect_error(.Call(f, list(1:4), c(3L, 1L)), "do not fill the matrix")
  g <- GenomicRanges::GRanges("chr1", IRanges::IRanges(1:4 * 10, width = 10))
  S4Vectors::mcols(g) <- S4Vectors::DataFrame(a = S4Vectors::Rle(c(0L, 0L, 5L, 5L)), b = c(1.5, 2, 3, 4))
  d <- gcn.mops:::.prepare_input(g)
  expect_identical(unname(d$X), cbind(c(0, 0, 5, 5), c(1.5, 2, 3, 4)))
  expect_identical(colnames(d$X), c("a", "b"))
  S4Vectors::mcols(g)$b[2] <- -1
  expect_error(gcn.mops:::.prepare_input(g), "All values must be greater or equal zero and finite.", fixed = TRUE)
  expect_error(gcn.mops:::.prepare_input(matrix(c(1L, NA, 3L, 4L), 2)),
               "All values must be greater or equal zero and finite.", fixed = TRUE)
  y <- matrix(1:4, 2, dimnames = list(c("r1", "r2"), c("s1", "s2")))
  expect_identical(gcn.mops:::.prepare_input(y)$X, y * 1)
})

test_that("labels: classes[idx + 1L] with idx's dimensions, NA beyond the classes", {
  f <- gcn.mops:::C_gm_labels
  cls <- c("CN0", "CN1", "CN2")
  idx <- as.raw(c(0, 2, 1, 3, 255, 0))
  expect_identical(.Call(f, idx, cls), cls[as.integer(idx) + 1L])
  m <- matrix(as.raw(c(0:2, 2:0)), 3)
  expect_identical(.Call(f, m, cls), matrix(cls[as.integer(m) + 1L], 3))
  big <- as.raw(rep(0:2, 5000))                           # past the size the custom allocator takes
  expect_identical(.Call(f, big, cls), cls[as.integer(big) + 1L])
  expect_identical(.Call(f, raw(0), cls), character(0))
})

test_that("allocation: type, dimensions, dimnames set in place", {
  a <- gcn.mops:::.alloc("double", c(3000L, 4L), list(NULL, letters[1:4]))
  expect_identical(dim(a), c(3000L, 4L))
  expect_type(a, "double")
  expect_identical(colnames(a), letters[1:4])
  a[] <- 1
  expect_identical(sum(a), 12000)
  expect_type(gcn.mops:::.alloc("raw", c(5000L, 2L)), "raw")
  v <- gcn.mops:::.alloc("integer", 10L)
  expect_null(dim(v))
  expect_length(v, 10L)
  expect_length(gcn.mops:::.alloc("double", c(3L, 0L)), 0L)
  expect_error(gcn.mops:::.alloc("character", 2L), "unsupported type")
  # the result vectors live as long as R holds them and are freed by R's collector
  keep <- lapply(1:20, function(i) gcn.mops:::.alloc("double", 1e5))
  invisible(gc())
  keep[[20]][] <- 2
  expect_identical(sum(keep[[20]]), 2e5)
})

test_that("label index: match(labels, classes) - 1L with the labels' dimensions", {
  f <- gcn.mops:::.label_index
  cls <- c("CN0", "CN1", "CN2")
  lab <- matrix(c("CN2", "CN2", "CN0", NA, "CN9", "CN1"), 3)
  expect_identical(f(lab, cls), matrix(match(lab, cls) - 1L, 3))
  u <- enc2utf8("CN\u00e4")
  expect_identical(f(c(u, iconv(u, "UTF-8", "latin1"), "CN0"), c("CN0", u)), c(1L, 1L, 0L))
  big <- rep(cls, 5000)
  expect_identical(f(big, cls), match(big, cls) - 1L)
  expect_identical(f(character(0), cls), integer(0))
})
