# Plots of a result, drawn with base graphics as cn.mops draws them:
# - plot(x, which): for CNV region `which`, a 2 x 2 figure over its regions plus `margin` regions on
#   each side: "Normalized Read Counts", "Local Assessments", "Read Count Ratios" (log2 of
#   (x + 0.01) / (lambda of the main class + 0.01)), "CNV Call" (individualCall); samples with a gain
#   in the region red, losses blue, the others grey (drawn first).
# - segplot(r, sampleIdx, seqnames): per sample, the local assessments (log ratios) per region as
#   points, the segments' means (or medians) as horizontal lines coloured by sign, a zero line, one
#   panel per chromosome; y-limits symmetric around 0.

setGeneric("segplot", function(r, ...) standardGeneric("segplot"))
setGeneric("plot")   # base's plot as an S4 generic of this namespace (callers inside it dispatch too)

# rows of gr overlapping range k of `ranges`
.rows_of <- function(gr, ranges, k) {
  chr <- as.character(seqnames(ranges))[k]
  which(as.character(seqnames(gr)) == chr & end(gr) >= start(ranges)[k] & start(gr) <= end(ranges)[k])
}

# "gain", "loss" or "" per sample for CNV region k (from the CNVs overlapping it)
.cnvr_calls <- function(x, k) {
  sn <- x@sampleNames
  out <- stats::setNames(rep("", length(sn)), sn)
  cnvs <- x@cnvs
  if (length(cnvs) == 0L) return(out)
  r <- x@cnvr
  chr <- as.character(seqnames(r))[k]
  hit <- which(as.character(seqnames(cnvs)) == chr & end(cnvs) >= start(r)[k] & start(cnvs) <= end(r)[k])
  v <- mcols(cnvs)
  for (i in hit) {
    s <- as.character(v$sampleName[i])
    out[s] <- if (v$mean[i] > 0) "gain" else if (v$mean[i] < 0) "loss" else out[s]
  }
  out
}

.plot_cnvr <- function(x, k, margin) {
  r <- x@cnvr
  gr <- x@gr
  if (k < 1L || k > length(r)) stop(sprintf("\"which\" must be between 1 and %d (the CNV regions).", length(r)))
  rows <- .rows_of(gr, r, k)
  chr_rows <- which(as.character(seqnames(gr)) == as.character(seqnames(r))[k])
  lo <- max(min(chr_rows), min(rows) - margin[1L])
  hi <- min(max(chr_rows), max(rows) + margin[2L])
  idx <- seq.int(lo, hi)
  calls <- .cnvr_calls(x, k)
  col <- ifelse(calls == "gain", "red", ifelse(calls == "loss", "blue", "grey"))
  ord <- c(which(col == "grey"), which(col != "grey"))
  main_class <- x@params$mainClass %||% "CN2"
  L <- x@params$L
  lam <- if (!is.null(L) && main_class %in% colnames(L)) L[idx, main_class] else rowMeans(x@normalizedData[idx, , drop = FALSE])
  X <- x@normalizedData[idx, , drop = FALSE]
  panels <- list("Normalized Read Counts" = X,
                 "Local Assessments" = x@localAssessments[idx, , drop = FALSE],
                 "Read Count Ratios" = log2((X + 0.01) / (lam + 0.01)),
                 "CNV Call" = x@individualCall[idx, , drop = FALSE])
  xlab <- sprintf("%s: %d - %d", as.character(seqnames(r))[k], start(gr)[lo], end(gr)[hi])
  pos <- (start(gr)[idx] + end(gr)[idx]) / 2
  old <- graphics::par(mfrow = c(2, 2))
  on.exit(graphics::par(old))
  for (nm in names(panels)) {
    M <- panels[[nm]]
    graphics::matplot(pos, M[, ord, drop = FALSE], type = "l", lty = 1, col = col[ord], main = nm, xlab = xlab,
                      ylab = if (nm == "Normalized Read Counts") "Read Count" else nm)
    graphics::abline(v = c(start(r)[k], end(r)[k]), lty = 2, col = "darkgrey")
  }
  invisible(NULL)
}

setMethod("plot", signature(x = "CNVDetectionResult", y = "missing"),
          function(x, which, margin = c(10, 10), toFile = FALSE) {
            if (length(x@cnvr) == 0L) stop("No CNV regions in result object. Rerun cn.mops with different parameters!")
            if (missing(which)) which <- seq_along(x@cnvr)
            margin <- rep(as.integer(margin), length.out = 2L)
            if (length(which) > 1L && !toFile && grDevices::dev.interactive()) {
              old <- grDevices::devAskNewPage(TRUE)
              on.exit(grDevices::devAskNewPage(old))
            }
            for (k in which) .plot_cnvr(x, as.integer(k), margin)
            invisible(NULL)
          })

setMethod("segplot", "CNVDetectionResult",
          function(r, sampleIdx, seqnames, segStat = "mean", plot.type = "s", altcol = TRUE, sbyc.layout,
                   cbys.nchrom = 1, cbys.layout, include.means = TRUE, zeroline = TRUE, pt.pch, pt.cex, pt.cols,
                   segcol, zlcol, ylim, lwd, ...) {
            if (!(segStat %in% c("mean", "median"))) stop("\"segStat\" must be \"mean\" or \"median\".")
            sn <- r@sampleNames
            if (missing(sampleIdx)) sampleIdx <- seq_along(sn)
            if (is.character(sampleIdx)) sampleIdx <- match(sampleIdx, sn)
            if (anyNA(sampleIdx) || any(sampleIdx < 1L | sampleIdx > length(sn)))
              stop("\"sampleIdx\" must select samples of the result.")
            gr <- r@gr
            chr_all <- as.character(GenomeInfoDb::seqnames(gr))   # (the argument seqnames masks the function)
            chroms <- if (missing(seqnames)) unique(chr_all) else as.character(seqnames)
            if (!all(chroms %in% chr_all)) stop("\"seqnames\" must be reference sequences of the result.")
            pch <- if (missing(pt.pch)) "." else pt.pch
            cex <- if (missing(pt.cex)) (if (identical(pch, ".")) 3 else 1) else pt.cex
            cols <- if (missing(pt.cols)) c("green", "black") else pt.cols
            segcol <- if (missing(segcol)) c("red", "blue") else rep(segcol, length.out = 2L)
            zlcol <- if (missing(zlcol)) "grey" else zlcol
            lwd <- if (missing(lwd)) 3 else lwd
            LA <- r@localAssessments
            seg <- r@segmentation
            seg_chr <- as.character(GenomeInfoDb::seqnames(seg))
            seg_v <- mcols(seg)
            n_panels <- length(sampleIdx) * length(chroms)
            if (n_panels > 1L) {
              nr <- ceiling(sqrt(n_panels))
              old <- graphics::par(mfrow = if (missing(sbyc.layout)) c(nr, ceiling(n_panels / nr)) else sbyc.layout)
              on.exit(graphics::par(old))
            }
            for (s in sampleIdx) for (ci in seq_along(chroms)) {
              chr <- chroms[ci]
              rows <- which(chr_all == chr)
              y <- LA[rows, s]
              pos <- (start(gr)[rows] + end(gr)[rows]) / 2
              yl <- if (missing(ylim)) { m <- max(abs(y[is.finite(y)]), 0.1); c(-m, m) } else ylim
              graphics::plot(pos, y, pch = pch, cex = cex, col = if (altcol) cols[(ci - 1L) %% length(cols) + 1L]
                             else cols[1L], ylim = yl, xlab = chr, ylab = "log ratio",
                             main = paste0(sn[s], if (length(chroms) > 1L) paste0(" (", chr, ")") else ""), ...)
              if (zeroline) graphics::abline(h = 0, col = zlcol)
              if (include.means && length(seg)) {
                k <- which(seg_chr == chr & as.character(seg_v$sampleName) == sn[s])
                v <- seg_v[[segStat]][k]
                graphics::segments(start(seg)[k], v, end(seg)[k], v, lwd = lwd,
                                   col = ifelse(v >= 0, segcol[1L], segcol[2L]))
              }
            }
            invisible(NULL)
          })
