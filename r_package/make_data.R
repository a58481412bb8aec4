# Builds gcn.mops/data/cn.mops.rda (XRanges, X, CNVRanges, exomeCounts: the example data cn.mops's
# vignette uses, under cn.mops's names) from the golden inputs of ../shared/golden (the inputs the golden
# cases xranges_default and exome_default were run on) and ../shared/data/xranges_true_cnvs.tsv, and copies
# the golden BAMs into gcn.mops/inst/extdata (the vignette's BAM files). These are the reference data's, not
# ours: they are not committed; scripts/setup.sh runs this where ../shared is present.
# Run from r_package/: Rscript make_data.R [shared dir]
suppressMessages(library(GenomicRanges))
args <- commandArgs(TRUE)
shared <- if (length(args)) args[1] else file.path("..", "..", "shared")
golden <- file.path(shared, "golden")

counts_of <- function(case) {
  m <- jsonlite::fromJSON(file.path(golden, case, "manifest.json"), simplifyVector = FALSE)
  info <- m$arrays$input_counts
  shape <- as.integer(unlist(info$shape))
  con <- gzfile(file.path(golden, case, info$file), "rb")
  on.exit(close(con))
  v <- readBin(con, "integer", n = prod(shape), size = 4, endian = "little")
  dim(v) <- shape
  colnames(v) <- unlist(m$sampleNames)
  rg <- utils::read.delim(file.path(golden, case, m$tables$input_ranges$file), colClasses = c(seqnames = "character"))
  list(counts = v, ranges = rg)
}

as_granges <- function(rg, counts, levels) {
  gr <- GRanges(factor(rg$seqnames, levels = levels), IRanges(rg$start, rg$end))
  mcols(gr) <- S4Vectors::DataFrame(counts, check.names = FALSE)
  gr
}

x <- counts_of("xranges_default")
XRanges <- as_granges(x$ranges, x$counts, "chrA")
X <- x$counts
rownames(X) <- paste("Chr_A", x$ranges$start, x$ranges$end, sep = "_")  # the row names of cn.mops's X
ex <- counts_of("exome_default")
exomeCounts <- as_granges(ex$ranges, ex$counts, sort(c(as.character(1:22), "X", "Y")))
truth <- utils::read.delim(file.path(shared, "data", "xranges_true_cnvs.tsv"), check.names = FALSE)
CNVRanges <- as_granges(truth[, 1:3], as.matrix(truth[, -(1:3)]), "chrA")
storage.mode(X) <- "integer"
dir.create(file.path("gcn.mops", "data"), showWarnings = FALSE)
save(XRanges, X, CNVRanges, exomeCounts, file = file.path("gcn.mops", "data", "cn.mops.rda"), compress = "xz")
bams <- list.files(file.path(golden, "bam"), pattern = "\\.bam(\\.bai)?$", full.names = TRUE)
dir.create(file.path("gcn.mops", "inst", "extdata"), recursive = TRUE, showWarnings = FALSE)
invisible(file.copy(bams, file.path("gcn.mops", "inst", "extdata"), overwrite = TRUE))
